package pgsink

import (
	"context"
	"fmt"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/eddy-streams/eddy/serde/registry"
)

// ProtobufMapper maps records whose values are Protobuf messages in
// Confluent's wire format (magic byte 0, schema id, message indexes,
// payload), of any schema: the writer schema (a .proto file) is fetched
// from reg by the record's schema id the first time the id is met, with
// the files it imports by reference, and compiled; the message indexes
// pick the message in it, which is decoded without generated code. Each
// field fills the column of its proto name (not its JSON name) as
// Protobuf's JSON mapping (protojson) writes it:
//
//   - strings, numbers (64-bit integers too), booleans, and enums by
//     their value's name, as their text; bytes as bytea;
//   - a field with presence (a message, an optional scalar, a oneof's
//     member) that is not set is NULL; a scalar without presence that is
//     not set is its zero value, as Protobuf reads it;
//   - google.protobuf.Timestamp as an RFC 3339 instant (timestamptz
//     columns), Duration as "1.500s" (text), the wrappers (Int64Value…) as
//     their value or NULL;
//   - other messages, repeated fields and maps as their JSON text (for
//     json/jsonb columns), as protojson writes them: proto names, 64-bit
//     integers as strings, bytes as base64, default values included.
//
// The record key fills keyColumn and a tombstone deletes, as with
// JSONMapper. A value that is not framed, names a schema id the registry
// does not know, a schema that does not compile or message indexes that
// name no message of it, or does not decode is the record's fault
// (dead-lettered); a registry that stays unreachable is not: the error
// wraps serde.ErrUnavailable and the sink stops.
func ProtobufMapper(keyColumn string, reg *registry.Client) Mapper {
	files := newWriterSchemas(reg, "protobuf", sr.TypeProtobuf, compileProto)
	return fieldsMapper(keyColumn, func(value []byte) (map[string]any, error) {
		file, id, rest, err := files.of(value)
		if err != nil {
			return nil, err
		}
		indexes, payload, err := registry.SplitMessageIndexes(rest)
		if err != nil {
			return nil, fmt.Errorf("protobuf: %w", err)
		}
		md, err := messageAt(file, indexes)
		if err != nil {
			return nil, fmt.Errorf("protobuf: writer schema id %d: %w", id, err)
		}
		m := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(payload, m); err != nil {
			return nil, fmt.Errorf("protobuf: payload (%d bytes) is not a %s (writer schema id %d): %w", len(payload), md.FullName(), id, err)
		}
		return protoFields(m, linker.ResolverFromFile(file))
	})
}

// writerPath is the name the writer schema's file is compiled under; the
// files it references are compiled under their reference's name, the
// path it imports them by.
const writerPath = "eddy-writer-schema.proto"

// compileProto compiles a writer schema's .proto text with the files it
// references (the well-known types need none).
func compileProto(s sr.Schema, refs []registry.Reference) (linker.File, error) {
	sources := map[string]string{writerPath: s.Schema}
	for _, r := range refs {
		sources[r.Name] = r.Schema.Schema
	}
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(sources),
		}),
	}
	files, err := c.Compile(context.Background(), writerPath)
	if err != nil {
		return nil, fmt.Errorf("does not compile: %w", err)
	}
	return files[0], nil
}

// messageAt is the message that indexes name in file: the index of a
// top-level message, then of a message nested in it, and so on.
func messageAt(file protoreflect.FileDescriptor, indexes []int) (protoreflect.MessageDescriptor, error) {
	var md protoreflect.MessageDescriptor
	for depth, i := range indexes {
		ms := file.Messages()
		if md != nil {
			ms = md.Messages()
		}
		if i >= ms.Len() {
			return nil, fmt.Errorf("message index %d (at depth %d) names no message", i, depth+1)
		}
		md = ms.Get(i)
	}
	return md, nil
}

// protoFields returns m's fields as their columns receive them (see
// ProtobufMapper): protojson's fields, with bytes as bytes rather than
// base64.
func protoFields(m protoreflect.Message, types linker.Resolver) (map[string]any, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true, Resolver: types}.Marshal(m.Interface())
	if err != nil {
		return nil, fmt.Errorf("protobuf: %s: %w", m.Descriptor().FullName(), err)
	}
	vals, err := jsonFields(b)
	if err != nil {
		return nil, fmt.Errorf("protobuf: %s: %w", m.Descriptor().FullName(), err)
	}
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := string(fd.Name())
		if _, ok := vals[name]; ok && fd.Kind() == protoreflect.BytesKind && fd.Cardinality() != protoreflect.Repeated {
			vals[name] = m.Get(fd).Bytes()
		}
	}
	return vals, nil
}
