package schemaregistry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"github.com/hamba/avro/v2"
	"github.com/jhump/protoreflect/v2/protoprint"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
)

// The schema types, spelled as in Confluent's "schemaType" (AVRO when the
// field is absent).
const (
	typeAvro     = "AVRO"
	typeProtobuf = "PROTOBUF"
	typeJSON     = "JSON"
)

// parsed is a schema checked by its type's parser, ready for compatibility
// checks: exactly one of avro, proto and json is set.
type parsed struct {
	avro  avro.Schema
	proto linker.File
	json  any // the decoded JSON Schema document
}

// canonical returns the text a schema is stored and identified by: Avro and
// JSON Schema compacted (so the same schema modulo whitespace gets the same
// id, as in Confluent), Protobuf trimmed.
func canonical(typ, text string) string {
	if typ == typeProtobuf {
		return strings.TrimSpace(text)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(text)); err != nil {
		return strings.TrimSpace(text) // the parser reports the error
	}
	return b.String()
}

// prepare checks a schema received from a client: it fixes its references'
// versions, turns a Protobuf descriptor into text, parses it and sets its
// identity. The error is for 42201.
func (st *state) prepare(rec *schemaRecord) (*parsed, error) {
	st.resolveRefVersions(rec)
	if err := st.descriptorToText(rec); err != nil {
		return nil, err
	}
	p, err := st.parse(rec)
	if err != nil {
		return nil, err
	}
	rec.Identity, err = identity(rec, p)
	return p, err
}

// identity is the text two schemas must share to be the same schema (with
// the same type and references): for Avro, the schema as hamba/avro writes
// it back, so that key order, {"type":"string"} for "string" and
// whitespace do not matter, as they do not to Confluent (which compares
// Avro's Java form; the two forms differ, the equivalences they draw
// are alike); for Protobuf, a digest of the file's descriptor without its
// name and source positions, so that whitespace, comments and the form the
// schema came in (text or descriptor) do not matter, as they do not to
// Confluent (which compares its canonical text); for JSON Schema, the
// canonical text.
func identity(rec *schemaRecord, p *parsed) (string, error) {
	switch {
	case p.avro != nil:
		b, err := json.Marshal(p.avro)
		if err != nil {
			return "", err
		}
		return string(b), nil
	case p.proto != nil:
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(bareDescriptor(p.proto, ""))
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(b)
		return "protobuf-descriptor-sha256:" + hex.EncodeToString(sum[:]), nil
	}
	return rec.Schema, nil
}

// bareDescriptor is f's descriptor named name, without the source
// positions and comments that the text it was compiled from gave it.
func bareDescriptor(f linker.File, name string) *descriptorpb.FileDescriptorProto {
	fdp := protodesc.ToFileDescriptorProto(f)
	fdp.SourceCodeInfo = nil
	fdp.Name = nil
	if name != "" {
		fdp.Name = proto.String(name)
	}
	return fdp
}

// descriptorToText replaces a PROTOBUF schema given as a base64-encoded
// serialized FileDescriptorProto (what Confluent's Python and Go
// serializers send) with the .proto text it describes, which is what the
// registry stores and answers, as Confluent's registry does (its
// ProtobufSchema parses the text and, failing that, a base64 descriptor).
// A schema made only of base64's characters cannot be a .proto file that
// defines anything (a definition needs ';' or '{'), so such a schema is
// taken for a descriptor, and one that is not a valid descriptor is
// refused saying so.
func (st *state) descriptorToText(rec *schemaRecord) error {
	if rec.Type != typeProtobuf || !isBase64(rec.Schema) {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(rec.Schema)
	if err != nil {
		return fmt.Errorf("the schema is neither .proto text nor a base64-encoded FileDescriptorProto: %w", err)
	}
	fdp := &descriptorpb.FileDescriptorProto{}
	if err := proto.Unmarshal(b, fdp); err != nil {
		return fmt.Errorf("the schema is base64 but not a serialized FileDescriptorProto: %w", err)
	}
	refs, err := st.resolveRefs(rec.References)
	if err != nil {
		return err
	}
	fdp.Name = proto.String(protoMain)
	defaultJSONNames(fdp.GetExtension(), fdp.GetMessageType())
	f, err := compileProtobuf(protocompile.SearchResult{Proto: fdp}, refs)
	if err != nil {
		return fmt.Errorf("the schema is a FileDescriptorProto that does not link: %w", err)
	}
	text, err := (&protoprint.Printer{}).PrintProtoToString(f)
	if err != nil {
		return fmt.Errorf("the schema is a FileDescriptorProto that cannot be written as .proto text: %w", err)
	}
	rec.Schema = canonical(typeProtobuf, text)
	return nil
}

// defaultJSONNames gives the fields of msgs without a json_name the one
// protoc gives them (the linker takes a missing one for ""): descriptors
// built by hand, or by Python's descriptor_pb2, often have none.
func defaultJSONNames(fields []*descriptorpb.FieldDescriptorProto, msgs []*descriptorpb.DescriptorProto) {
	for _, f := range fields {
		if f.JsonName == nil {
			f.JsonName = proto.String(jsonName(f.GetName()))
		}
	}
	for _, m := range msgs {
		defaultJSONNames(m.GetField(), nil)
		defaultJSONNames(m.GetExtension(), m.GetNestedType())
	}
}

// jsonName is protoc's default JSON name of a field: its name with each
// underscore dropped and the letter after it capitalized.
func jsonName(name string) string {
	var b strings.Builder
	upper := false
	for _, r := range name {
		switch {
		case r == '_':
			upper = true
		case upper:
			b.WriteString(strings.ToUpper(string(r)))
			upper = false
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isBase64 reports whether s is made of standard base64 only, in whole
// 4-character groups.
func isBase64(s string) bool {
	if s == "" || len(s)%4 != 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return true
}

// serializedProtobuf is a PROTOBUF schema as Confluent's ?format=serialized
// answers it: its FileDescriptorProto, serialized, base64-encoded. The
// file is named protoSerializedName (the text does not say its name).
func (st *state) serializedProtobuf(rec *schemaRecord) (string, error) {
	p, err := st.parse(rec)
	if err != nil {
		return "", err
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(bareDescriptor(p.proto, protoSerializedName))
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// protoSerializedName names the file of a serialized schema.
const protoSerializedName = "schema.proto"

// refSource is a referenced schema, resolved to its record.
type refSource struct {
	name string
	rec  *schemaRecord
}

// resolveRefs returns refs and, depth first, everything they reference,
// each once, dependencies before their dependents (the order Avro needs to
// parse named types). A reference to a missing subject or version is an
// error, as are cycles.
func (st *state) resolveRefs(refs []Reference) ([]refSource, error) {
	var out []refSource
	done := map[string]bool{}
	var visit func(refs []Reference, depth int) error
	visit = func(refs []Reference, depth int) error {
		if depth > 32 {
			return errors.New("references nest more than 32 deep (a cycle?)")
		}
		for _, r := range refs {
			if r.Name == "" || r.Subject == "" {
				return fmt.Errorf("reference %+v needs a name and a subject", r)
			}
			subj := st.Subjects[r.Subject]
			i := subj.find(r.Version)
			if i < 0 {
				return fmt.Errorf("reference %q: subject %q has no version %d", r.Name, r.Subject, r.Version)
			}
			rec := st.Schemas[subj.Versions[i].ID]
			if err := visit(rec.References, depth+1); err != nil {
				return err
			}
			if !done[r.Name] {
				done[r.Name] = true
				out = append(out, refSource{name: r.Name, rec: rec})
			}
		}
		return nil
	}
	return out, visit(refs, 0)
}

// parse validates rec with its type's parser, resolving its references
// from st. The error is the parser's, for the 42201 message.
func (st *state) parse(rec *schemaRecord) (*parsed, error) {
	if strings.TrimSpace(rec.Schema) == "" {
		return nil, errors.New("empty schema")
	}
	refs, err := st.resolveRefs(rec.References)
	if err != nil {
		return nil, err
	}
	switch rec.Type {
	case typeAvro:
		return parseAvro(rec.Schema, refs)
	case typeProtobuf:
		return parseProtobuf(rec.Schema, refs)
	case typeJSON:
		return parseJSONSchema(rec.Schema, refs)
	}
	return nil, fmt.Errorf("unknown schema type %q", rec.Type)
}

func parseAvro(text string, refs []refSource) (*parsed, error) {
	// A cache per parse: named types from the references are visible to
	// the schema, and nothing leaks between requests.
	cache := &avro.SchemaCache{}
	for _, r := range refs {
		if r.rec.Type != typeAvro {
			return nil, fmt.Errorf("reference %q is a %s schema, not AVRO", r.name, r.rec.Type)
		}
		if _, err := avro.ParseWithCache(r.rec.Schema, "", cache); err != nil {
			return nil, fmt.Errorf("reference %q: %w", r.name, err)
		}
	}
	s, err := avro.ParseWithCache(text, "", cache)
	if err != nil {
		return nil, err
	}
	return &parsed{avro: s}, nil
}

// protoMain is the file name the schema being parsed gets; references keep
// their own names, which are the paths the schema imports.
const protoMain = "eddy-schema-registry-input.proto"

func parseProtobuf(text string, refs []refSource) (*parsed, error) {
	f, err := compileProtobuf(protocompile.SearchResult{Source: strings.NewReader(text)}, refs)
	if err != nil {
		return nil, err
	}
	return &parsed{proto: f}, nil
}

// compileProtobuf compiles main (text, or a descriptor) as protoMain, its
// imports resolved from refs (by their names, which are import paths)
// and the standard imports (google/protobuf/*).
func compileProtobuf(main protocompile.SearchResult, refs []refSource) (linker.File, error) {
	files := map[string]string{}
	for _, r := range refs {
		if r.rec.Type != typeProtobuf {
			return nil, fmt.Errorf("reference %q is a %s schema, not PROTOBUF", r.name, r.rec.Type)
		}
		files[r.name] = r.rec.Schema
	}
	sources := &protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(files)}
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(protocompile.ResolverFunc(func(path string) (protocompile.SearchResult, error) {
			if path == protoMain {
				return main, nil
			}
			return sources.FindFileByPath(path)
		})),
	}
	out, err := c.Compile(context.Background(), protoMain)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// noLoader refuses every $ref that is not a registered reference: a
// registry must not read files or fetch URLs named by its clients.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref %s is not a reference of this schema", url)
}

// jsonMain is the URL of the schema being parsed.
const jsonMain = "eddy-schema-registry-input.json"

func parseJSONSchema(text string, refs []refSource) (*parsed, error) {
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	for _, r := range refs {
		if r.rec.Type != typeJSON {
			return nil, fmt.Errorf("reference %q is a %s schema, not JSON", r.name, r.rec.Type)
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(r.rec.Schema))
		if err != nil {
			return nil, fmt.Errorf("reference %q: %w", r.name, err)
		}
		if err := c.AddResource(r.name, doc); err != nil {
			return nil, fmt.Errorf("reference %q: %w", r.name, err)
		}
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	if err := c.AddResource(jsonMain, doc); err != nil {
		return nil, err
	}
	if _, err := c.Compile(jsonMain); err != nil {
		return nil, err
	}
	return &parsed{json: doc}, nil
}
