// Package jsonschema is a serde for JSON documents described by a JSON
// Schema, in the Confluent wire format through a schema registry
// (serde/registry): Go values encoded with serde.JSON's strict
// encoding/json rules, the schema registered as schemaType JSON.
//
// Serialize validates every document against the schema it writes with
// and refuses one that does not match (as Confluent's serializer with
// json.fail.invalid.schema=true): a producer bug stops at its source
// instead of reaching the topic's readers. Deserialize checks the
// record's schema id (fetched the first time the id is seen only) and,
// with WithValidateOnRead, validates the document against that writer
// schema before decoding it (off by default, as Confluent's
// deserializer).
//
// A schema without "$schema" is read as draft-07, Confluent's default. A
// schema's "$ref" may point inside itself only: the serde loads no file
// or URL (schema references are not supported).
package jsonschema

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/registry"
)

// Serde is the JSON Schema serde of one topic's keys or values. It is
// safe for concurrent use.
type Serde[T any] struct {
	reg      *registry.Client
	w        registry.Writer
	subject  string
	text     string             // the serde's schema, as given
	schema   *jsonschema.Schema // the serde's schema, compiled
	codec    serde.Serde[T]
	validate bool // validate on read

	writing registry.Found[*writerSchema] // found once, a refusal kept

	// readers maps a writer schema id to its compiled schema. Misses are
	// not serialized here: the registry client shares one fetch per id.
	rmu     sync.RWMutex
	readers map[int]*readerSchema
}

type writerSchema struct {
	id     int
	schema *jsonschema.Schema
}

// readerSchema is a writer schema as a reader needs it: compiled (if the
// serde validates on read), or why its records cannot be read (err, the
// record's fault).
type readerSchema struct {
	schema *jsonschema.Schema
	err    error
}

// Option configures a serde.
type Option func(*options)

type options struct {
	writer         []registry.Option
	validateOnRead bool
}

// WithValidateOnRead makes Deserialize validate each document against
// its writer schema: a record that does not match is a decode error.
func WithValidateOnRead() Option { return func(o *options) { o.validateOnRead = true } }

// WithWriter changes how the writer's schema id is found
// (registry.WithoutAutoRegister, registry.WithLatestVersion,
// registry.WithSubjectNameStrategy, whose record name is the schema's
// "title").
func WithWriter(opts ...registry.Option) Option {
	return func(o *options) { o.writer = append(o.writer, opts...) }
}

// Value returns the serde of topic's values, written with schema (JSON
// Schema text). It makes no request: call Check at start.
func Value[T any](reg *registry.Client, topic, schema string, opts ...Option) (*Serde[T], error) {
	return newSerde[T](reg, topic, false, schema, opts)
}

// Key returns the serde of topic's keys (subject "<topic>-key" by
// default); see Value.
func Key[T any](reg *registry.Client, topic, schema string, opts ...Option) (*Serde[T], error) {
	return newSerde[T](reg, topic, true, schema, opts)
}

func newSerde[T any](reg *registry.Client, topic string, key bool, text string, opts []Option) (*Serde[T], error) {
	side := "value"
	if key {
		side = "key"
	}
	if reg == nil {
		return nil, fmt.Errorf("eddy: jsonschema: %s serde of %q: no registry client", side, topic)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	doc, schema, err := compile(text)
	if err != nil {
		return nil, fmt.Errorf("eddy: jsonschema: %s schema of %q: %w", side, topic, err)
	}
	title := ""
	if m, ok := doc.(map[string]any); ok {
		title, _ = m["title"].(string)
	}
	w := registry.NewWriter(o.writer...)
	subject, err := w.Subject(topic, key, title)
	if err != nil {
		return nil, fmt.Errorf("eddy: jsonschema: %s serde of %q: %w", side, topic, err)
	}
	return &Serde[T]{reg: reg, w: w, subject: subject, text: text, schema: schema, codec: serde.JSON[T](),
		validate: o.validateOnRead, readers: map[int]*readerSchema{}}, nil
}

// noLoader refuses every "$ref" outside the schema: a schema fetched from
// a registry must not make the app read files or URLs.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref %s: the serde loads no file or URL (schema references are not supported)", url)
}

// schemaURL is the name the compiled schema gets.
const schemaURL = "urn:eddy:schema"

func compile(text string) (any, *jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.DefaultDraft(jsonschema.Draft7)
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, nil, err
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, nil, err
	}
	return doc, s, nil
}

// Subject is the subject the serde's writer schema is registered under.
func (s *Serde[T]) Subject() string { return s.subject }

// Check finds the id of the schema Serialize writes with: it registers
// the schema (auto-register), looks it up, or fetches the subject's
// latest. Call it before running the app so that a schema the registry
// refuses stops the app at start with the registry's message. A refusal
// is kept, as serde/avro's.
func (s *Serde[T]) Check(ctx context.Context) error {
	_, err := s.writer(ctx)
	return err
}

func (s *Serde[T]) writer(ctx context.Context) (*writerSchema, error) {
	return s.writing.Get(ctx, s.findWriter)
}

func (s *Serde[T]) findWriter(ctx context.Context) (*writerSchema, error) {
	own := sr.Schema{Schema: s.text, Type: sr.TypeJSON}
	switch {
	case s.w.UseLatest:
		latest, err := s.reg.Latest(ctx, s.subject)
		if err != nil {
			return nil, fmt.Errorf("eddy: jsonschema: %w", err)
		}
		if latest.Type != sr.TypeJSON {
			return nil, fmt.Errorf("eddy: jsonschema: the latest schema of subject %q (id %d) is %s, not JSON", s.subject, latest.ID, latest.Type)
		}
		_, schema, err := compile(latest.Schema.Schema)
		if err != nil {
			return nil, fmt.Errorf("eddy: jsonschema: the latest schema of subject %q (id %d): %w", s.subject, latest.ID, err)
		}
		return &writerSchema{id: latest.ID, schema: schema}, nil
	case s.w.AutoRegister:
		id, err := s.reg.Register(ctx, s.subject, own)
		if err != nil {
			return nil, fmt.Errorf("eddy: jsonschema: %w", err)
		}
		return &writerSchema{id: id, schema: s.schema}, nil
	default:
		id, err := s.reg.Lookup(ctx, s.subject, own)
		if errors.Is(err, registry.ErrNotRegistered) {
			return nil, fmt.Errorf("eddy: jsonschema: the schema is not registered under subject %q and auto-register is off: register it first: %w", s.subject, err)
		}
		if err != nil {
			return nil, fmt.Errorf("eddy: jsonschema: %w", err)
		}
		return &writerSchema{id: id, schema: s.schema}, nil
	}
}

// Serialize appends the Confluent header and the JSON encoding of v to
// dst, once the encoding is valid against the schema it is written with
// (an error naming the violations otherwise). Only the first call (unless
// Check ran) asks the registry.
func (s *Serde[T]) Serialize(dst []byte, v T) ([]byte, error) {
	w, err := s.writer(context.Background())
	if err != nil {
		return dst, err
	}
	start := len(dst)
	dst = registry.AppendHeader(dst, w.id)
	dst, err = s.codec.Serialize(dst, v)
	if err != nil {
		return dst[:start], fmt.Errorf("eddy: jsonschema: %w", err)
	}
	if err := validate(w.schema, dst[start+registry.HeaderSize:]); err != nil {
		return dst[:start], fmt.Errorf("eddy: jsonschema: %T does not match the schema of subject %q (id %d): %w", v, s.subject, w.id, err)
	}
	return dst, nil
}

func validate(schema *jsonschema.Schema, doc []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	return schema.Validate(v)
}

// Deserialize decodes a Confluent-framed JSON document. A record that is
// not framed, carries a schema id the registry does not know or that is
// not a JSON schema, is not valid JSON for T, or (WithValidateOnRead)
// does not match its writer schema is an error naming why (the record's
// fault: eddy's decode policy dead-letters it); a registry that stays
// unavailable is an error wrapping serde.ErrUnavailable.
func (s *Serde[T]) Deserialize(b []byte) (T, error) {
	var zero T
	id, payload, err := registry.SplitHeader(b)
	if err != nil {
		return zero, fmt.Errorf("eddy: jsonschema: %w", err)
	}
	rs, err := s.reader(id)
	if err != nil {
		return zero, err
	}
	if rs.schema != nil {
		if err := validate(rs.schema, payload); err != nil {
			return zero, fmt.Errorf("eddy: jsonschema: document (%d bytes) does not match writer schema id %d: %w", len(payload), id, err)
		}
	}
	v, err := s.codec.Deserialize(payload)
	if err != nil {
		return zero, fmt.Errorf("eddy: jsonschema: writer schema id %d: %w", id, err)
	}
	return v, nil
}

// reader returns writer schema id as the serde reads with it: from the
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
			ws, err := s.reg.SchemaByID(context.Background(), id)
			if errors.Is(err, registry.ErrUnknownID) {
				return nil, fmt.Errorf("eddy: jsonschema: writer schema id %d unknown to the registry: %w", id, err)
			}
			if err != nil {
				return nil, fmt.Errorf("eddy: jsonschema: %w", err)
			}
			rs = s.readerOf(id, ws)
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

func (s *Serde[T]) readerOf(id int, ws sr.Schema) *readerSchema {
	if ws.Type != sr.TypeJSON {
		return &readerSchema{err: fmt.Errorf("eddy: jsonschema: writer schema id %d is %s, not JSON", id, ws.Type)}
	}
	if !s.validate {
		return &readerSchema{}
	}
	_, schema, err := compile(ws.Schema)
	if err != nil {
		return &readerSchema{err: fmt.Errorf("eddy: jsonschema: writer schema id %d does not compile: %w", id, err)}
	}
	return &readerSchema{schema: schema}
}

var _ serde.Serde[int] = (*Serde[int])(nil)
