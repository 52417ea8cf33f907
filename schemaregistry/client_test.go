package schemaregistry_test

import (
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/schemaregistry"
	"github.com/twmb/franz-go/pkg/sr"
)

// TestClientFranzGo drives the server with franz-go's pkg/sr client, which
// encodes and decodes Confluent's JSON: a shape this server got wrong
// would fail here even where the server's own tests agree with it.
func TestRegistryClientFranzGo(t *testing.T) {
	reg, err := schemaregistry.NewServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	srv := httptest.NewServer(reg)
	defer srv.Close()
	cl, err := sr.NewClient(sr.URLs(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	v1 := sr.Schema{Schema: `{"type":"record","name":"Pay","fields":[{"name":"amount","type":"long"}]}`}
	v2 := sr.Schema{Schema: `{"type":"record","name":"Pay","fields":[{"name":"amount","type":"long"},{"name":"currency","type":"string","default":"EUR"}]}`}
	bad := sr.Schema{Schema: `{"type":"record","name":"Pay","fields":[{"name":"amount","type":"string"}]}`}

	types, err := cl.SupportedTypes(ctx)
	if err != nil || !slices.Equal(types, []sr.SchemaType{sr.TypeAvro, sr.TypeProtobuf, sr.TypeJSON}) {
		t.Fatalf("SupportedTypes = %v, %v", types, err)
	}

	s1, err := cl.CreateSchema(ctx, "pay-value", v1)
	if err != nil {
		t.Fatal(err)
	}
	if s1.Subject != "pay-value" || s1.Version != 1 || s1.ID != 1 || s1.Schema.Schema != v1.Schema || s1.Type != sr.TypeAvro {
		t.Fatalf("CreateSchema v1 = %+v", s1)
	}
	again, err := cl.CreateSchema(ctx, "pay-value", v1)
	if err != nil || again.ID != 1 || again.Version != 1 {
		t.Fatalf("CreateSchema v1 again = %+v, %v", again, err)
	}
	s2, err := cl.CreateSchema(ctx, "pay-value", v2)
	if err != nil || s2.ID != 2 || s2.Version != 2 {
		t.Fatalf("CreateSchema v2 = %+v, %v", s2, err)
	}

	byID, err := cl.SchemaByID(ctx, 2)
	if err != nil || byID.Schema != v2.Schema || byID.Type != sr.TypeAvro {
		t.Fatalf("SchemaByID = %+v, %v", byID, err)
	}
	text, err := cl.SchemaTextByID(ctx, 1)
	if err != nil || text != v1.Schema {
		t.Fatalf("SchemaTextByID = %q, %v", text, err)
	}
	versions, err := cl.SubjectVersions(ctx, "pay-value")
	if err != nil || !slices.Equal(versions, []int{1, 2}) {
		t.Fatalf("SubjectVersions = %v, %v", versions, err)
	}
	latest, err := cl.SchemaByVersion(ctx, "pay-value", -1)
	if err != nil || latest.Version != 2 || latest.ID != 2 {
		t.Fatalf("SchemaByVersion latest = %+v, %v", latest, err)
	}
	found, err := cl.LookupSchema(ctx, "pay-value", v1)
	if err != nil || found.Version != 1 || found.ID != 1 {
		t.Fatalf("LookupSchema = %+v, %v", found, err)
	}

	ok, err := cl.CheckCompatibility(ctx, "pay-value", -1, v2)
	if err != nil || !ok.Is {
		t.Fatalf("CheckCompatibility v2 = %+v, %v", ok, err)
	}
	no, err := cl.CheckCompatibility(ctx, "pay-value", -1, bad)
	if err != nil || no.Is {
		t.Fatalf("CheckCompatibility bad = %+v, %v", no, err)
	}
	_, err = cl.CreateSchema(ctx, "pay-value", bad)
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 409 || re.ErrorCode != 409 {
		t.Fatalf("registering an incompatible schema: %v", err)
	}

	if res := cl.Compatibility(ctx); res[0].Err != nil || res[0].Level != sr.CompatBackward {
		t.Fatalf("Compatibility = %+v", res[0])
	}
	if res := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, "pay-value"); res[0].Err != nil || res[0].Level != sr.CompatNone {
		t.Fatalf("SetCompatibility = %+v", res[0])
	}
	if res := cl.Compatibility(ctx, "pay-value"); res[0].Err != nil || res[0].Level != sr.CompatNone {
		t.Fatalf("Compatibility(pay-value) = %+v", res[0])
	}
	if _, err := cl.CreateSchema(ctx, "pay-value", bad); err != nil {
		t.Fatalf("under NONE: %v", err)
	}
	if res := cl.Mode(ctx); res[0].Err != nil || res[0].Mode != sr.ModeReadWrite {
		t.Fatalf("Mode = %+v", res[0])
	}

	deleted, err := cl.DeleteSubject(ctx, "pay-value", sr.SoftDelete)
	if err != nil || !slices.Equal(deleted, []int{1, 2, 3}) {
		t.Fatalf("DeleteSubject soft = %v, %v", deleted, err)
	}
	_, err = cl.SubjectVersions(ctx, "pay-value")
	if !errors.As(err, &re) || re.ErrorCode != sr.ErrSubjectNotFound.Code {
		t.Fatalf("versions of a soft-deleted subject: %v", err)
	}
	if deleted, err := cl.DeleteSubject(ctx, "pay-value", sr.HardDelete); err != nil || !slices.Equal(deleted, []int{1, 2, 3}) {
		t.Fatalf("DeleteSubject hard = %v, %v", deleted, err)
	}
	_, err = cl.SchemaByID(ctx, 1)
	if !errors.As(err, &re) || re.ErrorCode != sr.ErrSchemaNotFound.Code || re.SchemaError() != sr.ErrSchemaNotFound {
		t.Fatalf("SchemaByID after hard delete: %v", err)
	}
	subjects, err := cl.Subjects(ctx)
	if err != nil || len(subjects) != 0 {
		t.Fatalf("Subjects = %v, %v", subjects, err)
	}
}

// TestClientBasicAuth: the client's basic auth opens the server
// WithBasicAuth, and a wrong password is a 401 the client reports.
func TestRegistryClientBasicAuth(t *testing.T) {
	reg, err := schemaregistry.NewServer("", schemaregistry.WithBasicAuth(map[string]string{"app": "pw"}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg)
	defer srv.Close()
	for pass, want := range map[string]int{"pw": 0, "nope": 401} {
		cl, err := sr.NewClient(sr.URLs(srv.URL), sr.BasicAuth("app", pass))
		if err != nil {
			t.Fatal(err)
		}
		_, err = cl.Subjects(t.Context())
		var re *sr.ResponseError
		switch {
		case want == 0 && err != nil:
			t.Errorf("password %q: %v", pass, err)
		case want != 0 && (!errors.As(err, &re) || re.StatusCode != want):
			t.Errorf("password %q: %v, want status %d", pass, err, want)
		}
	}
}

// TestClientConfluentPython runs testdata/confluent_client.py: Confluent's
// own Python client (Debian's python3-confluent-kafka and python3-requests)
// against the server. It is skipped where that client is not installed,
// unless EDDY_REQUIRE_CONFLUENT_PYTHON is set (CI sets it, so CI never
// skips).
func TestRegistryClientConfluentPython(t *testing.T) {
	runConfluentPython(t, "testdata/confluent_client.py", "confluent_kafka.schema_registry")
}

// TestRegistryConfluentPythonSerdes runs testdata/confluent_serdes.py:
// Confluent's Python serializers (ProtobufSerializer, which sends schemas
// as base64 descriptors, and the legacy Avro MessageSerializer) against
// the server; skipped as TestRegistryClientConfluentPython is, also where
// python3-protobuf or python3-avro is missing.
func TestRegistryConfluentPythonSerdes(t *testing.T) {
	runConfluentPython(t, "testdata/confluent_serdes.py",
		"confluent_kafka.schema_registry.protobuf", "google.protobuf.message_factory", "confluent_kafka.avro")
}

// runConfluentPython runs script with a python3 that imports modules,
// given the URL of a fresh in-memory server; its failure (a non-zero
// exit) fails the test.
func runConfluentPython(t *testing.T, script string, modules ...string) {
	t.Helper()
	const install = "apt-get install python3-confluent-kafka python3-requests python3-protobuf python3-avro"
	skip := func(why string) {
		t.Helper()
		if os.Getenv("EDDY_REQUIRE_CONFLUENT_PYTHON") != "" {
			t.Fatalf("EDDY_REQUIRE_CONFLUENT_PYTHON is set but %s; %s", why, install)
		}
		t.Skipf("%s: %s; set EDDY_REQUIRE_CONFLUENT_PYTHON=1 to make this a failure", why, install)
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		skip("there is no python3")
	}
	// Debian's packages are for Debian's python; a python3 earlier in PATH
	// (pyenv) may not see them.
	imports := "import " + strings.Join(modules, ", ")
	for _, p := range []string{"/usr/bin/python3", python} {
		if exec.Command(p, "-c", imports).Run() == nil {
			python = p
			break
		}
		python = ""
	}
	if python == "" {
		skip(strings.Join(modules, ", ") + " not importable")
	}
	reg, err := schemaregistry.NewServer("")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	srv := httptest.NewServer(reg)
	defer srv.Close()
	out, err := exec.CommandContext(t.Context(), python, script, srv.URL).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
}
