package schemaregistry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"github.com/hamba/avro/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
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
// versions, parses it and sets its identity. The error is for 42201.
func (st *state) prepare(rec *schemaRecord) (*parsed, error) {
	st.resolveRefVersions(rec)
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
// are alike); for the others, the canonical text.
func identity(rec *schemaRecord, p *parsed) (string, error) {
	if p.avro == nil {
		return rec.Schema, nil
	}
	b, err := json.Marshal(p.avro)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

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
	files := map[string]string{protoMain: text}
	for _, r := range refs {
		if r.rec.Type != typeProtobuf {
			return nil, fmt.Errorf("reference %q is a %s schema, not PROTOBUF", r.name, r.rec.Type)
		}
		files[r.name] = r.rec.Schema
	}
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(files),
		}),
	}
	out, err := c.Compile(context.Background(), protoMain)
	if err != nil {
		return nil, err
	}
	return &parsed{proto: out[0]}, nil
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
