package schemaregistry

import (
	"strings"
	"testing"
)

// TestRegistryProtobufRules checks each rule protoReadable documents, once
// broken (the reason named) and once kept.
func TestRegistryProtobufRules(t *testing.T) {
	const base = `syntax = "proto2"; package p; message M { optional int32 a = 1; repeated string r = 2; message N { optional int64 x = 1; } optional N n = 3; }`
	for _, tc := range []struct {
		name, reader, want string // want "" means readable
	}{
		{"same", base, ""},
		{"varints interchangeable", `syntax = "proto2"; package p; message M { optional uint64 a = 1; repeated string r = 2; message N { optional bool x = 1; } optional N n = 3; }`, ""},
		{"string and bytes", `syntax = "proto2"; package p; message M { optional int32 a = 1; repeated bytes r = 2; message N { optional int64 x = 1; } optional N n = 3; }`, ""},
		{"field added", `syntax = "proto2"; package p; message M { optional int32 a = 1; repeated string r = 2; message N { optional int64 x = 1; } optional N n = 3; optional string z = 4; }`, ""},
		{"package", `syntax = "proto2"; package q; message M { optional int32 a = 1; repeated string r = 2; message N { optional int64 x = 1; } optional N n = 3; }`, "package changed from p to q; message p.M is missing"},
		{"message removed", `syntax = "proto2"; package p; message M { optional int32 a = 1; repeated string r = 2; }`, "message p.M.N is missing"},
		{"kind", `syntax = "proto2"; package p; message M { optional sint32 a = 1; repeated string r = 2; message N { optional int64 x = 1; } optional N n = 3; }`, "field p.M.a (1) changed type from varint to zigzag"},
		{"nested kind", `syntax = "proto2"; package p; message M { optional int32 a = 1; repeated string r = 2; message N { optional double x = 1; } optional N n = 3; }`, "field p.M.N.x (1) changed type from varint to double"},
		{"cardinality", `syntax = "proto2"; package p; message M { optional int32 a = 1; optional string r = 2; message N { optional int64 x = 1; } optional N n = 3; }`, "field p.M.r (2) changed between repeated and singular"},
		{"required added", `syntax = "proto2"; package p; message M { optional int32 a = 1; repeated string r = 2; message N { optional int64 x = 1; } optional N n = 3; required int32 q = 4; }`, "required field p.M.q (4) is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := parseProtobuf(base, nil)
			if err != nil {
				t.Fatal(err)
			}
			r, err := parseProtobuf(tc.reader, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(readable(r, w), "; ")
			if got != tc.want {
				t.Errorf("readable = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRegistryJSONSchemaRules checks each rule jsonReadable documents.
func TestRegistryJSONSchemaRules(t *testing.T) {
	const base = `{"type":"object","properties":{"id":{"type":"integer"},"kind":{"enum":["a","b"]},"tags":{"type":"array"}},"required":["id"]}`
	for _, tc := range []struct {
		name, reader, want string
	}{
		{"same", base, ""},
		{"integer read as number", `{"type":"object","properties":{"id":{"type":"number"},"kind":{"enum":["a","b"]},"tags":{"type":"array"}},"required":["id"]}`, ""},
		{"enum grown", `{"type":"object","properties":{"id":{"type":"integer"},"kind":{"enum":["a","b","c"]},"tags":{"type":"array"}},"required":["id"]}`, ""},
		{"open model drops a property", `{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`, ""},
		{"type", `{"type":"object","properties":{"id":{"type":"string"},"kind":{"enum":["a","b"]},"tags":{"type":"array"}},"required":["id"]}`, "#/properties/id: type integer no longer accepted"},
		{"root type", `{"type":"array"}`, "#: type object no longer accepted"},
		{"required", `{"type":"object","properties":{"id":{"type":"integer"},"kind":{"enum":["a","b"]},"tags":{"type":"array"}},"required":["id","tags"]}`, "#: property tags is required but the writer may omit it"},
		{"enum shrunk", `{"type":"object","properties":{"id":{"type":"integer"},"kind":{"enum":["a"]},"tags":{"type":"array"}},"required":["id"]}`, "#/properties/kind: enum value b removed"},
		{"closed model drops a property", `{"type":"object","properties":{"id":{"type":"integer"},"kind":{"enum":["a","b"]}},"required":["id"],"additionalProperties":false}`, "#/properties/tags: removed from a closed content model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := parseJSONSchema(base, nil)
			if err != nil {
				t.Fatal(err)
			}
			r, err := parseJSONSchema(tc.reader, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(readable(r, w), "; ")
			if got != tc.want {
				t.Errorf("readable = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRegistryJSONSchemaNoFileRefs(t *testing.T) {
	// A $ref that is not a registered reference is not loaded, even
	// from a file the server could read.
	_, err := parseJSONSchema(`{"$ref":"file:///etc/hostname"}`, nil)
	if err == nil || !strings.Contains(err.Error(), "not a reference of this schema") {
		t.Fatalf("err = %v", err)
	}
}
