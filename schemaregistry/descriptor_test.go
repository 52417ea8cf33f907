package schemaregistry

import (
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// orderDescriptor is shop.Order as Confluent's serializers send it: a
// FileDescriptorProto built field by field (as Python's descriptor_pb2
// does), serialized, base64-encoded. extra adds fields after id and qty.
func orderDescriptor(t *testing.T, qty descriptorpb.FieldDescriptorProto_Type, extra ...string) string {
	t.Helper()
	field := func(name string, n int32, typ descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(n), Type: typ.Enum(),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()}
	}
	fields := []*descriptorpb.FieldDescriptorProto{
		field("id", 1, descriptorpb.FieldDescriptorProto_TYPE_STRING),
		field("qty", 2, qty),
	}
	for i, name := range extra {
		fields = append(fields, field(name, int32(3+i), descriptorpb.FieldDescriptorProto_TYPE_STRING))
	}
	fdp := &descriptorpb.FileDescriptorProto{
		Name:        proto.String("shop/order.proto"),
		Package:     proto.String("shop"),
		Syntax:      proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("Order"), Field: fields}},
	}
	b, err := proto.Marshal(fdp)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// TestRegistryProtobufDescriptor: a PROTOBUF schema sent as a base64
// FileDescriptorProto is the same schema as its .proto text, whichever
// comes first, in registrations, lookups and compatibility checks; the
// registry answers text, and the descriptor with ?format=serialized.
func TestRegistryProtobufDescriptor(t *testing.T) {
	const (
		// text is orderDescriptor(INT64) written by hand, with a comment
		// and its own spacing: the same schema.
		text = "syntax = \"proto3\";\npackage shop;\n\n// An order.\nmessage Order {\n  string id = 1;\n  int64 qty = 2;\n}"
		// printed is how the registry writes orderDescriptor(INT64,
		// "note") as text.
		printed = "syntax = \"proto3\";\n\npackage shop;\n\nmessage Order {\n  string id = 1;\n\n  int64 qty = 2;\n\n  string note = 3;\n}"
		noted   = `syntax = "proto3"; package shop; message Order { string id = 1; int64 qty = 2; string note = 3; }`
	)
	desc := orderDescriptor(t, descriptorpb.FieldDescriptorProto_TYPE_INT64)
	noteDesc := orderDescriptor(t, descriptorpb.FieldDescriptorProto_TYPE_INT64, "note")
	badDesc := orderDescriptor(t, descriptorpb.FieldDescriptorProto_TYPE_STRING)
	s := newServer(t, "")
	run(t, s, []step{
		{"text", "POST", "/subjects/p/versions", typedBody("PROTOBUF", text), 200, `{"id":1}`},
		{"lookup by descriptor", "POST", "/subjects/p", typedBody("PROTOBUF", desc), 200,
			`{"subject":"p","version":1,"id":1,"schemaType":"PROTOBUF","schema":` + quote(text) + `}`},
		{"register the descriptor: the same version", "POST", "/subjects/p/versions", typedBody("PROTOBUF", desc), 200, `{"id":1}`},
		{"still one version", "GET", "/subjects/p/versions", "", 200, `[1]`},
		{"descriptor first", "POST", "/subjects/q/versions", typedBody("PROTOBUF", noteDesc), 200, `{"id":2}`},
		{"answered as text", "GET", "/schemas/ids/2", "", 200, `{"schemaType":"PROTOBUF","schema":` + quote(printed) + `}`},
		{"raw text", "GET", "/schemas/ids/2/schema", "", 200, printed},
		{"lookup by text", "POST", "/subjects/q", typedBody("PROTOBUF", noted), 200,
			`{"subject":"q","version":1,"id":2,"schemaType":"PROTOBUF","schema":` + quote(printed) + `}`},
		{"register the text: the same id", "POST", "/subjects/p/versions", typedBody("PROTOBUF", noted), 200, `{"id":2}`},
		{"compatible descriptor", "POST", "/compatibility/subjects/p/versions/1", typedBody("PROTOBUF", noteDesc), 200, `{"is_compatible":true}`},
		{"incompatible descriptor", "POST", "/compatibility/subjects/p/versions/latest", typedBody("PROTOBUF", badDesc), 200, `{"is_compatible":false}`},
	})
	// protobuf-go's errors vary their spaces on purpose: the message is
	// checked for its start.
	for _, path := range []string{"/subjects/p/versions", "/subjects/p", "/compatibility/subjects/p/versions"} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("POST", path, strings.NewReader(typedBody("PROTOBUF", "abcd"))))
		const want = `{"error_code":42201,"message":"Invalid schema of type PROTOBUF, details: the schema is base64 but not a serialized FileDescriptorProto: proto:`
		if rec.Code != 422 || !strings.HasPrefix(rec.Body.String(), want) {
			t.Errorf("POST %s with a base64 string that is not a descriptor: %d %s", path, rec.Code, rec.Body)
		}
	}

	// ?format=serialized answers the descriptor, which registers as the
	// same schema again.
	for _, path := range []string{"/schemas/ids/2?format=serialized", "/subjects/q/versions/1?format=serialized"} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		var got struct{ Schema string }
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != 200 {
			t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
		}
		b, err := base64.StdEncoding.DecodeString(got.Schema)
		if err != nil {
			t.Fatalf("%s: not base64: %q", path, got.Schema)
		}
		fdp := &descriptorpb.FileDescriptorProto{}
		if err := proto.Unmarshal(b, fdp); err != nil {
			t.Fatalf("%s: not a FileDescriptorProto: %v", path, err)
		}
		var fields []string
		for _, f := range fdp.GetMessageType()[0].GetField() {
			fields = append(fields, f.GetName())
		}
		if fdp.GetPackage() != "shop" || fdp.GetMessageType()[0].GetName() != "Order" || strings.Join(fields, ",") != "id,qty,note" {
			t.Fatalf("%s: descriptor %v", path, fdp)
		}
		run(t, s, []step{{"serialized registers as the same", "POST", "/subjects/q/versions", typedBody("PROTOBUF", got.Schema), 200, `{"id":2}`}})
	}
	run(t, s, []step{{"other types ignore format", "GET", "/schemas/ids/1?format=serialized", "", 200, ""}})
}

// TestRegistryProtobufDescriptorImports: a descriptor that imports
// another file resolves it from the references, as text does.
func TestRegistryProtobufDescriptorImports(t *testing.T) {
	const money = `syntax = "proto3"; package shop; message Money { int64 cents = 1; }`
	fdp := &descriptorpb.FileDescriptorProto{
		Name: proto.String("price.proto"), Package: proto.String("shop"), Syntax: proto.String("proto3"),
		Dependency: []string{"money.proto"},
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("Price"), Field: []*descriptorpb.FieldDescriptorProto{{
			Name: proto.String("amount"), Number: proto.Int32(1), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			Type: descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum(), TypeName: proto.String(".shop.Money"),
		}}}},
	}
	b, err := proto.Marshal(fdp)
	if err != nil {
		t.Fatal(err)
	}
	desc := base64.StdEncoding.EncodeToString(b)
	ref := Reference{"money.proto", "money", 1}
	run(t, newServer(t, ""), []step{
		{"money", "POST", "/subjects/money/versions", typedBody("PROTOBUF", money), 200, `{"id":1}`},
		{"unresolved import", "POST", "/subjects/price/versions", typedBody("PROTOBUF", desc), 422, ""},
		{"import by reference", "POST", "/subjects/price/versions", typedBody("PROTOBUF", desc, ref), 200, `{"id":2}`},
		{"the same as its text", "POST", "/subjects/price", typedBody("PROTOBUF",
			`syntax = "proto3"; package shop; import "money.proto"; message Price { Money amount = 1; }`, ref), 200, ""},
		{"well-known import without a reference", "POST", "/subjects/t/versions", typedBody("PROTOBUF",
			`syntax = "proto3"; import "google/protobuf/timestamp.proto"; message T { google.protobuf.Timestamp at = 1; }`), 200, `{"id":3}`},
	})
}

// TestRegistryReidentifies: a state written when Protobuf schemas were
// identified by their text gets today's identities on load, so that the
// same schema spelled otherwise (or sent as a descriptor) finds its id.
func TestRegistryReidentifies(t *testing.T) {
	const text = `syntax = "proto3"; package shop; message Order { string id = 1; int64 qty = 2; }`
	dir := t.TempDir()
	s1, err := NewServer(dir)
	if err != nil {
		t.Fatal(err)
	}
	run(t, s1, []step{{"text", "POST", "/subjects/p/versions", typedBody("PROTOBUF", text), 200, `{"id":1}`}})
	s1.Close()
	// Rewrite the identity as the registry computed it before.
	st, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	st.Schemas[1].Identity = text
	// And the same schema spaced otherwise, registered then under its
	// own id (2) by subject q: one schema, two ids, once reidentified.
	spacedRec := *st.Schemas[1]
	spacedRec.Schema = strings.ReplaceAll(text, " = ", "=")
	spacedRec.Identity = spacedRec.Schema
	st.Schemas[2] = &spacedRec
	st.Subjects["q"] = &subjectRecord{Versions: []versionRecord{{Version: 1, ID: 2}}}
	st.NextID = 3
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := saveState(dir, data); err != nil {
		t.Fatal(err)
	}
	run(t, newServer(t, dir), []step{
		{"spaced", "POST", "/subjects/p", typedBody("PROTOBUF", strings.ReplaceAll(text, "; ", ";\n  ")), 200, ""},
		{"descriptor", "POST", "/subjects/p/versions", typedBody("PROTOBUF", orderDescriptor(t, descriptorpb.FieldDescriptorProto_TYPE_INT64)), 200, `{"id":1}`},
		// q's version holds id 2: found, and registering again adds
		// no version, whichever id the schema has elsewhere.
		{"lookup q", "POST", "/subjects/q", typedBody("PROTOBUF", text), 200, ""},
		{"register q", "POST", "/subjects/q/versions", typedBody("PROTOBUF", text), 200, `{"id":2}`},
		{"q versions", "GET", "/subjects/q/versions", "", 200, `[1]`},
	})
}
