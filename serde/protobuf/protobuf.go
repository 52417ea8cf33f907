// Package protobuf is a serde for Protobuf messages (generated Go types of
// google.golang.org/protobuf) in the Confluent wire format through a
// schema registry (serde/registry).
//
// The serde registers the message's .proto file as its schema (schemaType
// PROTOBUF, printed from the generated file descriptor) and frames each
// record as Confluent's Protobuf serializer does: the magic byte 0, the
// schema id, the message indexes (the message's path in its file; the
// single byte 0 for the file's first message), the Protobuf encoding.
//
// Deserialize reads the header and indexes, checks with the writer schema
// (fetched by id the first time the id is seen only) that they name the
// serde's message, and unmarshals with proto.Unmarshal: fields the writer
// added are kept as unknown fields (and written again by Serialize), as
// Protobuf's evolution rules mean them to be.
//
// The serde's .proto file may import the well-known types only
// (google/protobuf/*.proto, which registries resolve themselves); other
// imports would need schema references, which the serde does not
// register.
package protobuf

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/bufbuild/protocompile"
	"github.com/jhump/protoreflect/v2/protoprint"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/registry"
)

// maxIndexes bounds the message indexes a record may claim: deeper than
// any real nesting of messages.
const maxIndexes = 64

// Serde is the Protobuf serde of one topic's keys or values, for
// messages of type M (a generated message pointer, *pb.Payment). It is
// safe for concurrent use.
type Serde[M proto.Message] struct {
	reg     *registry.Client
	w       registry.Writer
	subject string
	text    string // the .proto source registered
	desc    protoreflect.MessageDescriptor
	typ     protoreflect.MessageType
	indexes []int // the message's path in its file

	writing registry.Found[int] // the id Serialize writes with

	// writers maps a writer schema id to its parsed file. Misses are not
	// serialized here: the registry client shares one fetch per id.
	rmu     sync.RWMutex
	writers map[int]*writerFile
}

// writerFile is the file of a writer schema, or why records written with
// it cannot be read (err, the record's fault).
type writerFile struct {
	file protoreflect.FileDescriptor
	err  error
}

// Value returns the serde of topic's values, of message type M. opts
// change how the writer's schema id is found (registry.WithoutAutoRegister,
// registry.WithLatestVersion, registry.WithSubjectNameStrategy, whose
// record name is the message's full name). It makes no request: call
// Check at start.
func Value[M proto.Message](reg *registry.Client, topic string, opts ...registry.Option) (*Serde[M], error) {
	return newSerde[M](reg, topic, false, opts)
}

// Key returns the serde of topic's keys (subject "<topic>-key" by
// default); see Value.
func Key[M proto.Message](reg *registry.Client, topic string, opts ...registry.Option) (*Serde[M], error) {
	return newSerde[M](reg, topic, true, opts)
}

func newSerde[M proto.Message](reg *registry.Client, topic string, key bool, opts []registry.Option) (*Serde[M], error) {
	side := "value"
	if key {
		side = "key"
	}
	if reg == nil {
		return nil, fmt.Errorf("eddy: protobuf: %s serde of %q: no registry client", side, topic)
	}
	var zero M
	// A generated message answers ProtoReflect on a nil pointer; a
	// dynamic one (dynamicpb) has no type without a value.
	typ, err := messageType(zero)
	if err != nil {
		return nil, fmt.Errorf("eddy: protobuf: %s serde of %q: %w", side, topic, err)
	}
	desc := typ.Descriptor()
	file := desc.ParentFile()
	for i := range file.Imports().Len() {
		if imp := file.Imports().Get(i).Path(); !strings.HasPrefix(imp, "google/protobuf/") {
			return nil, fmt.Errorf("eddy: protobuf: %s serde of %q: %s imports %s: only the well-known types (google/protobuf/*) can be imported (schema references are not supported)",
				side, topic, file.Path(), imp)
		}
	}
	text, err := (&protoprint.Printer{}).PrintProtoToString(file)
	if err != nil {
		return nil, fmt.Errorf("eddy: protobuf: %s serde of %q: print %s: %w", side, topic, file.Path(), err)
	}
	w := registry.NewWriter(opts...)
	subject, err := w.Subject(topic, key, string(desc.FullName()))
	if err != nil {
		return nil, fmt.Errorf("eddy: protobuf: %s serde of %q: %w", side, topic, err)
	}
	s := &Serde[M]{reg: reg, w: w, subject: subject, text: text, desc: desc, typ: typ,
		indexes: indexesOf(desc), writers: map[int]*writerFile{}}
	return s, nil
}

func messageType(m proto.Message) (t protoreflect.MessageType, err error) {
	defer func() {
		if recover() != nil {
			err = fmt.Errorf("%T is not a generated message type", m)
		}
	}()
	return m.ProtoReflect().Type(), nil
}

// indexesOf returns d's path in its file: the index of its top-level
// message, then of each nested message down to d.
func indexesOf(d protoreflect.MessageDescriptor) []int {
	var path []int
	for p := protoreflect.Descriptor(d); ; p = p.Parent() {
		if _, ok := p.(protoreflect.FileDescriptor); ok {
			break
		}
		path = append([]int{p.Index()}, path...)
	}
	return path
}

// Subject is the subject the serde's writer schema is registered under.
func (s *Serde[M]) Subject() string { return s.subject }

// Schema is the .proto source the serde registers.
func (s *Serde[M]) Schema() string { return s.text }

// Check finds the id of the schema Serialize writes with: it registers
// the message's file (auto-register), looks it up, or fetches the
// subject's latest (which must define the message). Call it before
// running the app so that a schema the registry refuses stops the app at
// start with the registry's message. A refusal is kept, as serde/avro's.
func (s *Serde[M]) Check(ctx context.Context) error {
	_, err := s.writer(ctx)
	return err
}

func (s *Serde[M]) writer(ctx context.Context) (int, error) {
	return s.writing.Get(ctx, s.findWriter)
}

func (s *Serde[M]) findWriter(ctx context.Context) (int, error) {
	own := sr.Schema{Schema: s.text, Type: sr.TypeProtobuf}
	switch {
	case s.w.UseLatest:
		latest, err := s.reg.Latest(ctx, s.subject)
		if err != nil {
			return 0, fmt.Errorf("eddy: protobuf: %w", err)
		}
		wf := parseWriter(latest.ID, latest.Schema)
		if wf.err != nil {
			return 0, wf.err
		}
		// The records carry the serde's indexes: the latest file must
		// name the serde's message at the same path.
		if err := s.names(wf.file, s.indexes, latest.ID); err != nil {
			return 0, fmt.Errorf("%w (the latest schema of subject %q, version %d)", err, s.subject, latest.Version)
		}
		return latest.ID, nil
	case s.w.AutoRegister:
		id, err := s.reg.Register(ctx, s.subject, own)
		if err != nil {
			return 0, fmt.Errorf("eddy: protobuf: %w", err)
		}
		return id, nil
	default:
		id, err := s.reg.Lookup(ctx, s.subject, own)
		if errors.Is(err, registry.ErrNotRegistered) {
			return 0, fmt.Errorf("eddy: protobuf: the schema is not registered under subject %q and auto-register is off: register it first: %w", s.subject, err)
		}
		if err != nil {
			return 0, fmt.Errorf("eddy: protobuf: %w", err)
		}
		return id, nil
	}
}

// Serialize appends the Confluent header, the message indexes and the
// Protobuf encoding of m to dst. Only the first call (unless Check ran)
// asks the registry.
func (s *Serde[M]) Serialize(dst []byte, m M) ([]byte, error) {
	id, err := s.writer(context.Background())
	if err != nil {
		return dst, err
	}
	start := len(dst)
	dst = registry.AppendHeader(dst, id)
	dst = appendIndexes(dst, s.indexes)
	// Deterministic: map entries in key order, so that one message always
	// gives the same bytes (a key's bytes are its identity in stores,
	// partitions, the table cache and joins).
	dst, err = proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, m)
	if err != nil {
		return dst[:start], fmt.Errorf("eddy: protobuf: encode for subject %q: %w", s.subject, err)
	}
	return dst, nil
}

// appendIndexes appends Confluent's message indexes: the single byte 0
// for [0], else the count and each index as zig-zag varints.
func appendIndexes(dst []byte, indexes []int) []byte {
	if len(indexes) == 1 && indexes[0] == 0 {
		return append(dst, 0)
	}
	dst = binary.AppendVarint(dst, int64(len(indexes)))
	for _, i := range indexes {
		dst = binary.AppendVarint(dst, int64(i))
	}
	return dst
}

// Deserialize decodes a Confluent-framed Protobuf record into a new M. A
// record that is not framed, carries a schema id the registry does not
// know, message indexes that do not name the serde's message in its
// writer schema, or a payload that is not a valid encoding of it is an
// error naming why (the record's fault: eddy's decode policy
// dead-letters it); a registry that stays unavailable is an error
// wrapping serde.ErrUnavailable.
func (s *Serde[M]) Deserialize(b []byte) (M, error) {
	var zero M
	id, rest, err := registry.SplitHeader(b)
	if err != nil {
		return zero, fmt.Errorf("eddy: protobuf: %w", err)
	}
	wf, err := s.writerFile(id)
	if err != nil {
		return zero, err
	}
	payload, err := s.checkIndexes(wf.file, rest, id)
	if err != nil {
		return zero, err
	}
	m := s.typ.New().Interface().(M)
	if err := proto.Unmarshal(payload, m); err != nil {
		return zero, fmt.Errorf("eddy: protobuf: payload (%d bytes) is not a %s (writer schema id %d): %w", len(payload), s.desc.FullName(), id, err)
	}
	return m, nil
}

// checkIndexes reads the message indexes at the start of b, walking the
// writer's file as it goes (no allocation), and returns the payload after
// them if they name the serde's message.
func (s *Serde[M]) checkIndexes(file protoreflect.FileDescriptor, b []byte, id int) ([]byte, error) {
	n, k := binary.Varint(b)
	if k <= 0 || n < 0 || n > maxIndexes {
		return nil, fmt.Errorf("eddy: protobuf: message indexes unreadable after the header (count %d): not Confluent's Protobuf framing", n)
	}
	b = b[k:]
	if n == 0 { // the shortcut for [0]
		if err := s.namesAt(file, id, 0); err != nil {
			return nil, err
		}
		return b, nil
	}
	var msg protoreflect.MessageDescriptor
	for i := range int(n) {
		x, k := binary.Varint(b)
		if k <= 0 {
			return nil, fmt.Errorf("eddy: protobuf: message index %d of %d unreadable: not Confluent's Protobuf framing", i+1, n)
		}
		b = b[k:]
		ms := file.Messages()
		if msg != nil {
			ms = msg.Messages()
		}
		if x < 0 || x >= int64(ms.Len()) {
			return nil, fmt.Errorf("eddy: protobuf: message index %d (at depth %d) names no message of writer schema id %d", x, i+1, id)
		}
		msg = ms.Get(int(x))
	}
	if msg.FullName() != s.desc.FullName() {
		return nil, fmt.Errorf("eddy: protobuf: the record's message indexes name %s in writer schema id %d, not the serde's %s", msg.FullName(), id, s.desc.FullName())
	}
	return b, nil
}

// namesAt checks that file's top-level message i is the serde's message.
func (s *Serde[M]) namesAt(file protoreflect.FileDescriptor, id, i int) error {
	if i >= file.Messages().Len() {
		return fmt.Errorf("eddy: protobuf: message index %d names no message of writer schema id %d", i, id)
	}
	if got := file.Messages().Get(i).FullName(); got != s.desc.FullName() {
		return fmt.Errorf("eddy: protobuf: the record's message indexes name %s in writer schema id %d, not the serde's %s", got, id, s.desc.FullName())
	}
	return nil
}

// names checks that indexes name the serde's message in file.
func (s *Serde[M]) names(file protoreflect.FileDescriptor, indexes []int, id int) error {
	_, err := s.checkIndexes(file, appendIndexes(nil, indexes), id)
	return err
}

// writerFile returns the parsed file of writer schema id: from the
// cache, or (the first time id is seen) from the registry.
func (s *Serde[M]) writerFile(id int) (*writerFile, error) {
	s.rmu.RLock()
	wf, ok := s.writers[id]
	s.rmu.RUnlock()
	if !ok {
		s.rmu.RLock()
		wf, ok = s.writers[id]
		s.rmu.RUnlock()
		if !ok {
			ws, err := s.reg.SchemaByID(context.Background(), id)
			if errors.Is(err, registry.ErrUnknownID) {
				return nil, fmt.Errorf("eddy: protobuf: writer schema id %d unknown to the registry: %w", id, err)
			}
			if err != nil {
				return nil, fmt.Errorf("eddy: protobuf: %w", err)
			}
			wf = parseWriter(id, ws)
			s.rmu.Lock()
			s.writers[id] = wf
			s.rmu.Unlock()
		}
	}
	if wf.err != nil {
		return nil, wf.err
	}
	return wf, nil
}

// writerPath is the name a writer schema's file gets when parsed.
const writerPath = "eddy-writer-schema.proto"

// parseWriter parses a writer schema's .proto source.
func parseWriter(id int, ws sr.Schema) *writerFile {
	if ws.Type != sr.TypeProtobuf {
		return &writerFile{err: fmt.Errorf("eddy: protobuf: writer schema id %d is %s, not PROTOBUF", id, ws.Type)}
	}
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(map[string]string{writerPath: ws.Schema}),
		}),
	}
	files, err := c.Compile(context.Background(), writerPath)
	if err != nil {
		return &writerFile{err: fmt.Errorf("eddy: protobuf: writer schema id %d does not parse (schema references are not supported): %w", id, err)}
	}
	return &writerFile{file: files[0]}
}

var _ serde.Serde[proto.Message] = (*Serde[proto.Message])(nil)
