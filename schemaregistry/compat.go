package schemaregistry

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The compatibility levels, as Confluent spells them.
const (
	compatBackward           = "BACKWARD"
	compatBackwardTransitive = "BACKWARD_TRANSITIVE"
	compatForward            = "FORWARD"
	compatForwardTransitive  = "FORWARD_TRANSITIVE"
	compatFull               = "FULL"
	compatFullTransitive     = "FULL_TRANSITIVE"
	compatNone               = "NONE"

	defaultCompatibility = compatBackward
)

// compatLevel returns the level named by s (any case), or false.
func compatLevel(s string) (string, bool) {
	s = strings.ToUpper(s)
	switch s {
	case compatBackward, compatBackwardTransitive, compatForward, compatForwardTransitive,
		compatFull, compatFullTransitive, compatNone:
		return s, true
	}
	return "", false
}

// oldSchema is a registered version a new schema is checked against.
type oldSchema struct {
	version int
	text    string
	parsed  *parsed
}

// incompatibilities checks next against olds (oldest first) under level
// and returns why it is incompatible, in the shape of Confluent's verbose
// messages; nil means compatible. The transitive levels check every old
// version, the others only the latest, as in Confluent.
//
// The errorType values are this registry's own (READER_INCOMPATIBLE,
// WRITER_INCOMPATIBLE), not Confluent's finer ones (TYPE_MISMATCH,
// READER_FIELD_MISSING_DEFAULT_VALUE, ...): the parsers report a reason,
// which the description carries, not Confluent's classification.
//
// BACKWARD means the new schema reads data written with the old one
// (consumers upgrade first); FORWARD that the old schema reads data written
// with the new one (producers upgrade first); FULL both.
func incompatibilities(level string, next *parsed, olds []oldSchema) []string {
	if level == compatNone || len(olds) == 0 {
		return nil
	}
	if !strings.HasSuffix(level, "_TRANSITIVE") {
		olds = olds[len(olds)-1:]
	}
	backward := strings.HasPrefix(level, "BACKWARD") || strings.HasPrefix(level, "FULL")
	forward := strings.HasPrefix(level, "FORWARD") || strings.HasPrefix(level, "FULL")
	var msgs []string
	for i := len(olds) - 1; i >= 0; i-- {
		old := olds[i]
		var problems []string
		if backward {
			for _, p := range readable(next, old.parsed) {
				problems = append(problems, fmt.Sprintf("{errorType:'READER_INCOMPATIBLE', description:'The new schema cannot read data written with the old schema: %s'}", p))
			}
		}
		if forward {
			for _, p := range readable(old.parsed, next) {
				problems = append(problems, fmt.Sprintf("{errorType:'WRITER_INCOMPATIBLE', description:'The old schema cannot read data written with the new schema: %s'}", p))
			}
		}
		if len(problems) > 0 {
			msgs = append(msgs, problems...)
			msgs = append(msgs,
				fmt.Sprintf("{oldSchemaVersion: %d}", old.version),
				fmt.Sprintf("{oldSchema: '%s'}", old.text),
				fmt.Sprintf("{compatibility: '%s'}", level))
			// Confluent reports the first incompatible version only.
			break
		}
	}
	return msgs
}

// readable lists why data written with writer cannot be read with reader.
// Schemas of different types never can.
func readable(reader, writer *parsed) []string {
	switch {
	case reader.avro != nil && writer.avro != nil:
		// A fresh SchemaCompatibility per check: its cache is keyed by
		// parsing canonical form, which ignores defaults, so it must not
		// outlive one pair of schemas.
		if err := avro.NewSchemaCompatibility().Compatible(reader.avro, writer.avro); err != nil {
			return []string{err.Error()}
		}
		return nil
	case reader.proto != nil && writer.proto != nil:
		return protoReadable(reader.proto, writer.proto)
	case reader.json != nil && writer.json != nil:
		return jsonReadable(reader.json, writer.json, "#")
	}
	return []string{"the schema type changed"}
}

// protoReadable checks this subset of Confluent's Protobuf rules, and only
// these: the package is unchanged; every message of the writer (nested ones
// included) exists in the reader; a field number present in both keeps its
// cardinality (repeated or not) and a wire-compatible type (int32, int64,
// uint32, uint64 and bool interchangeable; sint32 and sint64; fixed32 and
// sfixed32; fixed64 and sfixed64; string and bytes; a message or enum type
// by full name); a field the reader requires (proto2) is in the writer.
// Not checked: oneof moves, enum values, reserved numbers, options.
func protoReadable(reader, writer protoreflect.FileDescriptor) []string {
	var out []string
	if reader.Package() != writer.Package() {
		out = append(out, fmt.Sprintf("package changed from %s to %s", writer.Package(), reader.Package()))
	}
	var walk func(ws protoreflect.MessageDescriptors)
	walk = func(ws protoreflect.MessageDescriptors) {
		for i := 0; i < ws.Len(); i++ {
			w := ws.Get(i)
			if w.IsMapEntry() {
				continue
			}
			rd, err := findMessage(reader, w.FullName())
			if err != nil {
				out = append(out, fmt.Sprintf("message %s is missing", w.FullName()))
				continue
			}
			out = append(out, protoFields(rd, w)...)
			walk(w.Messages())
		}
	}
	walk(writer.Messages())
	return out
}

func findMessage(f protoreflect.FileDescriptor, name protoreflect.FullName) (protoreflect.MessageDescriptor, error) {
	var find func(ms protoreflect.MessageDescriptors) protoreflect.MessageDescriptor
	find = func(ms protoreflect.MessageDescriptors) protoreflect.MessageDescriptor {
		for i := 0; i < ms.Len(); i++ {
			m := ms.Get(i)
			if m.FullName() == name {
				return m
			}
			if n := find(m.Messages()); n != nil {
				return n
			}
		}
		return nil
	}
	if m := find(f.Messages()); m != nil {
		return m, nil
	}
	return nil, fmt.Errorf("no message %s", name)
}

func protoFields(r, w protoreflect.MessageDescriptor) []string {
	var out []string
	for i := 0; i < r.Fields().Len(); i++ {
		rf := r.Fields().Get(i)
		wf := w.Fields().ByNumber(rf.Number())
		if wf == nil {
			if rf.Cardinality() == protoreflect.Required {
				out = append(out, fmt.Sprintf("required field %s (%d) is missing", rf.FullName(), rf.Number()))
			}
			continue
		}
		if rf.IsList() != wf.IsList() || rf.IsMap() != wf.IsMap() {
			out = append(out, fmt.Sprintf("field %s (%d) changed between repeated and singular", rf.FullName(), rf.Number()))
			continue
		}
		if rk, wk := protoKindGroup(rf), protoKindGroup(wf); rk != wk {
			out = append(out, fmt.Sprintf("field %s (%d) changed type from %s to %s", rf.FullName(), rf.Number(), wk, rk))
		}
	}
	return out
}

// protoKindGroup names a field's type so that wire-compatible types get
// the same name.
func protoKindGroup(f protoreflect.FieldDescriptor) string {
	if f.IsMap() {
		return "map<" + protoKindGroup(f.MapKey()) + "," + protoKindGroup(f.MapValue()) + ">"
	}
	switch f.Kind() {
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.BoolKind:
		return "varint"
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return "zigzag"
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return "fixed32"
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return "fixed64"
	case protoreflect.StringKind, protoreflect.BytesKind:
		return "string/bytes"
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return string(f.Message().FullName())
	case protoreflect.EnumKind:
		return string(f.Enum().FullName())
	}
	return f.Kind().String()
}

// jsonReadable checks this subset of Confluent's JSON Schema rules, and
// only these, at the root and recursively in the "properties" both
// schemas declare: the reader's "type" admits every type the writer's
// admits (integer is a number); the reader's "required" names only
// properties the writer requires too; the reader's "enum" holds every
// value of the writer's; a reader closed with "additionalProperties":
// false declares every property the writer declares. Not checked:
// $ref targets, allOf/anyOf/oneOf/not, items, patternProperties, numeric
// and string bounds, and properties added to an open content model.
func jsonReadable(reader, writer any, path string) []string {
	r, rok := reader.(map[string]any)
	w, wok := writer.(map[string]any)
	if !rok || !wok {
		if reader == false && writer != false {
			return []string{fmt.Sprintf("%s: the reader accepts nothing", path)}
		}
		return nil
	}
	var out []string
	if rt, ok := jsonTypes(r["type"]); ok {
		wt, wok := jsonTypes(w["type"])
		if !wok {
			out = append(out, fmt.Sprintf("%s: type narrowed to %v", path, rt))
		} else {
			for _, t := range wt {
				if !slices.Contains(rt, t) && (t != "integer" || !slices.Contains(rt, "number")) {
					out = append(out, fmt.Sprintf("%s: type %s no longer accepted", path, t))
				}
			}
		}
	}
	wreq, _ := w["required"].([]any)
	if rreq, ok := r["required"].([]any); ok {
		for _, name := range rreq {
			if !slices.Contains(wreq, name) {
				out = append(out, fmt.Sprintf("%s: property %v is required but the writer may omit it", path, name))
			}
		}
	}
	if renum, ok := r["enum"].([]any); ok {
		wenum, _ := w["enum"].([]any)
		if wenum == nil {
			out = append(out, fmt.Sprintf("%s: enum added", path))
		}
		for _, v := range wenum {
			if !slices.ContainsFunc(renum, func(x any) bool { return reflect.DeepEqual(x, v) }) {
				out = append(out, fmt.Sprintf("%s: enum value %v removed", path, v))
			}
		}
	}
	rprops, _ := r["properties"].(map[string]any)
	wprops, _ := w["properties"].(map[string]any)
	closed := r["additionalProperties"] == false
	names := make([]string, 0, len(wprops))
	for name := range wprops {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		rp, ok := rprops[name]
		if !ok {
			if closed {
				out = append(out, fmt.Sprintf("%s/properties/%s: removed from a closed content model", path, name))
			}
			continue
		}
		out = append(out, jsonReadable(rp, wprops[name], path+"/properties/"+name)...)
	}
	return out
}

// jsonTypes reads a "type" keyword: a name or a list of names.
func jsonTypes(v any) ([]string, bool) {
	switch t := v.(type) {
	case string:
		return []string{t}, true
	case []any:
		var out []string
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out, true
	}
	return nil, false
}
