// Package avro is a serde for Avro records in the Confluent wire format
// through a schema registry (serde/registry), on github.com/hamba/avro/v2:
// Go structs with `avro` tags, generated types and map[string]any
// (generic records).
//
// Serialize writes with the serde's schema (registered under its subject,
// or looked up, or the subject's latest: registry.Writer) and frames the
// payload with its id. Deserialize reads any writer schema a record
// carries with the serde's schema as the reader schema (Avro schema
// resolution: a field the writer added is skipped, a field it lacks takes
// the reader's default), fetching the writer schema by id the first time
// the id is seen only.
//
// A key and a value serde are built for one topic each (Key, Value): the
// subject depends on the topic and on the side, and serde.Serde has no
// topic parameter (eddy's sinks name the topic at To, so the app passes
// the same name twice).
package avro

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/registry"
)

// maxRecordBytes bounds the items of an array and the bytes of a string
// or bytes value that a record may claim: Kafka's default
// message.max.bytes, eddy's DefaultMaxRecordBytes.
const maxRecordBytes = 1_000_000

// Serde is the Avro serde of one topic's keys or values. It is safe for
// concurrent use.
type Serde[T any] struct {
	reg     *registry.Client
	w       registry.Writer
	subject string
	text    string      // the serde's schema, as given
	schema  avro.Schema // the reader schema, and the writer's unless UseLatest
	api     avro.API

	// writing is the id and the schema Serialize writes with, found by
	// the first Serialize or by Check (a refusal kept, see registry.Found).
	writing registry.Found[*writerSchema]

	// readers maps a writer schema id to its resolution to the reader
	// schema. Misses are not serialized here: the registry client shares
	// one fetch per id among the callers, its failure included, so a
	// record's decode waits at most one retry bound.
	rmu     sync.RWMutex
	readers map[int]*readerSchema

	readerPool, writerPool, valuePool sync.Pool
}

type writerSchema struct {
	id     int
	schema avro.Schema
}

// readerSchema is how records of one writer schema decode: with schema
// (resolved to the reader schema), or not at all (err: the writer schema
// cannot be read as the reader schema, the record's fault).
type readerSchema struct {
	schema avro.Schema
	err    error
}

// Value returns the serde of topic's values, written and read with
// schema (Avro schema JSON). opts change how the writer's schema id is
// found (registry.WithoutAutoRegister, registry.WithLatestVersion,
// registry.WithSubjectNameStrategy). It makes no request: call Check at
// start to fail there rather than at the first record.
func Value[T any](reg *registry.Client, topic, schema string, opts ...registry.Option) (*Serde[T], error) {
	return newSerde[T](reg, topic, false, schema, opts)
}

// Key returns the serde of topic's keys (subject "<topic>-key" by
// default); see Value.
func Key[T any](reg *registry.Client, topic, schema string, opts ...registry.Option) (*Serde[T], error) {
	return newSerde[T](reg, topic, true, schema, opts)
}

func newSerde[T any](reg *registry.Client, topic string, key bool, text string, opts []registry.Option) (*Serde[T], error) {
	side := "value"
	if key {
		side = "key"
	}
	if reg == nil {
		return nil, fmt.Errorf("eddy: avro: %s serde of %q: no registry client", side, topic)
	}
	// A cache of its own: hamba's default cache is shared by the whole
	// process, and two versions of a record share its name.
	schema, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("eddy: avro: %s schema of %q: %w", side, topic, err)
	}
	w := registry.NewWriter(opts...)
	record := ""
	if n, ok := schema.(avro.NamedSchema); ok {
		record = n.FullName()
	}
	subject, err := w.Subject(topic, key, record)
	if err != nil {
		return nil, fmt.Errorf("eddy: avro: %s serde of %q: %w", side, topic, err)
	}
	// hamba allocates what a record's array block count or string length
	// claims before it reads the items: unbounded, a 10-byte record can
	// claim 2^40 items, and the process dies out of memory (not a
	// panic: no policy could dead-letter it). Bound both by the largest
	// record a broker accepts by default.
	api := avro.Config{MaxByteSliceSize: maxRecordBytes, MaxSliceAllocSize: maxRecordBytes}.Freeze()
	s := &Serde[T]{reg: reg, w: w, subject: subject, text: text, schema: schema, api: api, readers: map[int]*readerSchema{}}
	s.readerPool.New = func() any { return avro.NewReader(nil, 0, avro.WithReaderConfig(s.api)) }
	s.writerPool.New = func() any { return avro.NewWriter(nil, 512, avro.WithWriterConfig(s.api)) }
	s.valuePool.New = func() any { return new(T) }
	return s, nil
}

// Subject is the subject the serde's writer schema is registered under.
func (s *Serde[T]) Subject() string { return s.subject }

// Check finds the id of the schema Serialize writes with now: it
// registers the schema (auto-register), looks it up, or fetches the
// subject's latest. Call it before running the app so that a schema the
// registry refuses (incompatible with the subject's versions, or not
// registered with auto-register off) stops the app at start with the
// registry's message rather than at the first record. Without it, the
// first Serialize does the same. A refusal is kept (every later Serialize
// returns it without asking the registry again): after registering the
// schema, restart the app.
func (s *Serde[T]) Check(ctx context.Context) error {
	_, err := s.writer(ctx)
	return err
}

func (s *Serde[T]) writer(ctx context.Context) (*writerSchema, error) {
	return s.writing.Get(ctx, s.findWriter)
}

func (s *Serde[T]) findWriter(ctx context.Context) (*writerSchema, error) {
	own := sr.Schema{Schema: s.text, Type: sr.TypeAvro}
	switch {
	case s.w.UseLatest:
		latest, err := s.reg.Latest(ctx, s.subject)
		if err != nil {
			return nil, fmt.Errorf("eddy: avro: %w", err)
		}
		schema, err := avro.ParseWithCache(latest.Schema.Schema, "", &avro.SchemaCache{})
		if err != nil {
			return nil, fmt.Errorf("eddy: avro: latest schema of subject %q (id %d): %w", s.subject, latest.ID, err)
		}
		// As Confluent's latest.compatibility.strict: what the app
		// builds with its schema must be readable with the latest one.
		if err := avro.NewSchemaCompatibility().Compatible(schema, s.schema); err != nil {
			return nil, fmt.Errorf("eddy: avro: the latest schema of subject %q (id %d, version %d) cannot read the serde's schema: %w",
				s.subject, latest.ID, latest.Version, err)
		}
		return &writerSchema{id: latest.ID, schema: schema}, nil
	case s.w.AutoRegister:
		id, err := s.reg.Register(ctx, s.subject, own)
		if err != nil {
			return nil, fmt.Errorf("eddy: avro: %w", err)
		}
		return &writerSchema{id: id, schema: s.schema}, nil
	default:
		id, err := s.reg.Lookup(ctx, s.subject, own)
		if errors.Is(err, registry.ErrNotRegistered) {
			return nil, fmt.Errorf("eddy: avro: the schema is not registered under subject %q and auto-register is off: register it first: %w", s.subject, err)
		}
		if err != nil {
			return nil, fmt.Errorf("eddy: avro: %w", err)
		}
		return &writerSchema{id: id, schema: s.schema}, nil
	}
}

// Serialize appends the Confluent header and the Avro encoding of v to
// dst. Only the first call (unless Check ran) asks the registry.
func (s *Serde[T]) Serialize(dst []byte, v T) ([]byte, error) {
	w, err := s.writer(context.Background())
	if err != nil {
		return dst, err
	}
	aw := s.writerPool.Get().(*avro.Writer)
	defer s.writerPool.Put(aw)
	aw.Reset(nil)
	aw.Error = nil
	aw.WriteVal(w.schema, v)
	if aw.Error != nil {
		return dst, fmt.Errorf("eddy: avro: encode for subject %q: %w", s.subject, aw.Error)
	}
	return append(registry.AppendHeader(dst, w.id), aw.Buffer()...), nil
}

// Deserialize decodes a Confluent-framed Avro record with its writer
// schema resolved to the serde's. A record that is not framed, carries a
// schema id the registry does not know or a writer schema the serde's
// cannot read, or whose payload does not match its schema is an error
// naming why (the record's fault: eddy's decode policy dead-letters it);
// a registry that stays unavailable is an error wrapping
// serde.ErrUnavailable.
func (s *Serde[T]) Deserialize(b []byte) (T, error) {
	var v T
	id, payload, err := registry.SplitHeader(b)
	if err != nil {
		return v, fmt.Errorf("eddy: avro: %w", err)
	}
	rs, err := s.reader(id)
	if err != nil {
		return v, err
	}
	r := s.readerPool.Get().(*avro.Reader)
	defer func() {
		r.Reset(nil) // the pool keeps no reference to b
		r.Error = nil
		s.readerPool.Put(r)
	}()
	r.Reset(payload)
	r.Error = nil
	// Decoded into a pooled *T and copied out: &v would escape to the
	// heap, an allocation per record.
	p := s.valuePool.Get().(*T)
	defer func() {
		*p = v // zero: the pool keeps nothing of the record
		s.valuePool.Put(p)
	}()
	r.ReadVal(rs.schema, p)
	if r.Error != nil {
		return v, fmt.Errorf("eddy: avro: payload (%d bytes) does not match writer schema id %d: %w", len(payload), id, r.Error)
	}
	if r.Peek(); r.Error == nil {
		return v, fmt.Errorf("eddy: avro: payload (%d bytes) longer than writer schema id %d reads: it does not match its schema", len(payload), id)
	}
	return *p, nil
}

// reader returns how records written with schema id decode: from the
// cache, or (the first time id is seen) from the registry.
func (s *Serde[T]) reader(id int) (*readerSchema, error) {
	s.rmu.RLock()
	rs, ok := s.readers[id]
	s.rmu.RUnlock()
	if !ok {
		s.rmu.RLock()
		rs, ok = s.readers[id]
		s.rmu.RUnlock()
		if !ok {
			var err error
			if rs, err = s.resolve(id); err != nil {
				return nil, err
			}
			s.rmu.Lock()
			s.readers[id] = rs
			s.rmu.Unlock()
		}
	}
	if rs.err != nil {
		return nil, rs.err
	}
	return rs, nil
}

// resolve fetches writer schema id and resolves it to the reader schema.
// An error is returned uncached (the registry's: unavailable, or an
// unknown id); a writer schema that cannot be read is cached as such.
func (s *Serde[T]) resolve(id int) (*readerSchema, error) {
	ws, err := s.reg.SchemaByID(context.Background(), id)
	if errors.Is(err, registry.ErrUnknownID) {
		return nil, fmt.Errorf("eddy: avro: writer schema id %d unknown to the registry: %w", id, err)
	}
	if err != nil {
		return nil, fmt.Errorf("eddy: avro: %w", err)
	}
	if ws.Type != sr.TypeAvro {
		return &readerSchema{err: fmt.Errorf("eddy: avro: writer schema id %d is %s, not Avro", id, ws.Type)}, nil
	}
	writer, err := avro.ParseWithCache(ws.Schema, "", &avro.SchemaCache{})
	if err != nil {
		return &readerSchema{err: fmt.Errorf("eddy: avro: writer schema id %d does not parse: %w", id, err)}, nil
	}
	resolved, err := avro.NewSchemaCompatibility().Resolve(s.schema, writer)
	if err != nil {
		return &readerSchema{err: fmt.Errorf("eddy: avro: writer schema id %d cannot be read with the serde's schema: %w", id, err)}, nil
	}
	return &readerSchema{schema: resolved}, nil
}

var _ serde.Serde[int] = (*Serde[int])(nil)
