package schemaregistry

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// step is one request and the answer Confluent's registry gives to it.
type step struct {
	name   string
	method string
	path   string
	body   string
	status int
	want   string // JSON, compared as values; or the raw text for /schema
}

func run(t *testing.T, h http.Handler, steps []step) {
	t.Helper()
	for _, st := range steps {
		req := httptest.NewRequest(st.method, st.path, strings.NewReader(st.body))
		req.Header.Set("Content-Type", contentType)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != st.status {
			t.Errorf("%s: %s %s: status %d, want %d; body %s", st.name, st.method, st.path, rec.Code, st.status, rec.Body)
			continue
		}
		if ct := rec.Header().Get("Content-Type"); ct != contentType {
			t.Errorf("%s: Content-Type %q", st.name, ct)
		}
		if st.want == "" {
			continue // the status is what is checked
		}
		if strings.HasSuffix(st.path, "/schema") && st.status == http.StatusOK {
			if got := rec.Body.String(); got != st.want {
				t.Errorf("%s: %s %s:\n got %s\nwant %s", st.name, st.method, st.path, got, st.want)
			}
			continue
		}
		var got, want any
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Errorf("%s: answer is not JSON: %v: %s", st.name, err, rec.Body)
			continue
		}
		if err := json.Unmarshal([]byte(st.want), &want); err != nil {
			t.Fatalf("%s: bad want: %v", st.name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %s %s:\n got %s\nwant %s", st.name, st.method, st.path, strings.TrimSpace(rec.Body.String()), st.want)
		}
	}
}

func newServer(t *testing.T, dir string, opts ...Option) *Server {
	t.Helper()
	s, err := NewServer(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// body is a schema request for an Avro schema text.
func body(schema string) string {
	b, _ := json.Marshal(map[string]string{"schema": schema})
	return string(b)
}

func typedBody(typ, schema string, refs ...Reference) string {
	b, _ := json.Marshal(schemaRequest{Schema: schema, SchemaType: typ, References: refs})
	return string(b)
}

const (
	userV1 = `{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}`
	// userV1Spaced is userV1 with whitespace: the same schema.
	userV1Spaced = "{ \"type\": \"record\",\n \"name\": \"User\", \"fields\": [ {\"name\": \"id\", \"type\": \"long\"} ] }"
	// userV2 adds a field with a default: BACKWARD compatible.
	userV2 = `{"type":"record","name":"User","fields":[{"name":"id","type":"long"},{"name":"email","type":"string","default":""}]}`
	// userBad adds a field without a default: the new schema cannot read
	// old records.
	userBad = `{"type":"record","name":"User","fields":[{"name":"id","type":"long"},{"name":"age","type":"int"}]}`
)

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestRegistryEndpoints(t *testing.T) {
	s := newServer(t, "")
	run(t, s, []step{
		{"types", "GET", "/schemas/types", "", 200, `["JSON","PROTOBUF","AVRO"]`},
		{"no subjects", "GET", "/subjects", "", 200, `[]`},
		{"global config", "GET", "/config", "", 200, `{"compatibilityLevel":"BACKWARD"}`},
		{"mode", "GET", "/mode", "", 200, `{"mode":"READWRITE"}`},

		{"register", "POST", "/subjects/users-value/versions", body(userV1), 200, `{"id":1}`},
		{"register again, whitespace differs", "POST", "/subjects/users-value/versions", body(userV1Spaced), 200, `{"id":1}`},
		{"register again, keys reordered", "POST", "/subjects/users-value/versions", body(`{"name":"User","fields":[{"type":"long","name":"id"}],"type":"record"}`), 200, `{"id":1}`},
		{"same schema, other subject: same id", "POST", "/subjects/other-value/versions", body(userV1), 200, `{"id":1}`},
		{"subjects", "GET", "/subjects", "", 200, `["other-value","users-value"]`},
		{"prefix", "GET", "/subjects?subjectPrefix=users", "", 200, `["users-value"]`},
		{"versions", "GET", "/subjects/users-value/versions", "", 200, `[1]`},
		{"version 1", "GET", "/subjects/users-value/versions/1", "", 200,
			`{"subject":"users-value","version":1,"id":1,"schema":` + quote(userV1) + `}`},
		{"latest", "GET", "/subjects/users-value/versions/latest", "", 200,
			`{"subject":"users-value","version":1,"id":1,"schema":` + quote(userV1) + `}`},
		{"raw", "GET", "/subjects/users-value/versions/1/schema", "", 200, userV1},
		{"by id", "GET", "/schemas/ids/1", "", 200, `{"schema":` + quote(userV1) + `}`},
		{"by id, ?subject= accepted", "GET", "/schemas/ids/1?subject=users-value", "", 200, `{"schema":` + quote(userV1) + `}`},
		{"raw by id", "GET", "/schemas/ids/1/schema", "", 200, userV1},
		{"id versions", "GET", "/schemas/ids/1/versions", "", 200,
			`[{"subject":"other-value","version":1},{"subject":"users-value","version":1}]`},
		{"id subjects", "GET", "/schemas/ids/1/subjects", "", 200, `["other-value","users-value"]`},
		{"lookup", "POST", "/subjects/users-value", body(userV1Spaced), 200,
			`{"subject":"users-value","version":1,"id":1,"schema":` + quote(userV1) + `}`},

		{"evolve", "POST", "/subjects/users-value/versions", body(userV2), 200, `{"id":2}`},
		{"versions after evolve", "GET", "/subjects/users-value/versions", "", 200, `[1,2]`},
		{"latest after evolve", "GET", "/subjects/users-value/versions/-1", "", 200,
			`{"subject":"users-value","version":2,"id":2,"schema":` + quote(userV2) + `}`},
		{"old version still there", "POST", "/subjects/users-value", body(userV1), 200,
			`{"subject":"users-value","version":1,"id":1,"schema":` + quote(userV1) + `}`},

		{"all schemas", "GET", "/schemas", "", 200, `[` +
			`{"subject":"other-value","version":1,"id":1,"schema":` + quote(userV1) + `},` +
			`{"subject":"users-value","version":1,"id":1,"schema":` + quote(userV1) + `},` +
			`{"subject":"users-value","version":2,"id":2,"schema":` + quote(userV2) + `}]`},
		{"latest schemas of users", "GET", "/schemas?latestOnly=true&subjectPrefix=users", "", 200,
			`[{"subject":"users-value","version":2,"id":2,"schema":` + quote(userV2) + `}]`},
		{"subject with a slash", "POST", "/subjects/a%2Fb/versions", body(userV1), 200, `{"id":1}`},
		{"subject with a slash read", "GET", "/subjects/a%2Fb/versions/1", "", 200,
			`{"subject":"a/b","version":1,"id":1,"schema":` + quote(userV1) + `}`},
		{"subject with a slash deleted", "DELETE", "/subjects/a%2Fb", "", 200, `[1]`},
		{"subject with a slash gone", "DELETE", "/subjects/a%2Fb?permanent=true", "", 200, `[1]`},
		{"check compatible", "POST", "/compatibility/subjects/users-value/versions/latest", body(userV2), 200, `{"is_compatible":true}`},
		{"check compatible verbose", "POST", "/compatibility/subjects/users-value/versions/latest?verbose=true", body(userV2), 200,
			`{"is_compatible":true,"messages":[]}`},
		{"check incompatible", "POST", "/compatibility/subjects/users-value/versions/latest", body(userBad), 200, `{"is_compatible":false}`},
		{"check all versions", "POST", "/compatibility/subjects/users-value/versions", body(userBad), 200, `{"is_compatible":false}`},
		{"check no subject: nothing to break", "POST", "/compatibility/subjects/nobody/versions", body(userBad), 200, `{"is_compatible":true}`},

		{"subject config unset", "GET", "/config/users-value", "", 404,
			`{"error_code":40408,"message":"Subject 'users-value' does not have subject-level compatibility configured"}`},
		{"subject config default to global", "GET", "/config/users-value?defaultToGlobal=true", "", 200, `{"compatibilityLevel":"BACKWARD"}`},
		{"set subject config", "PUT", "/config/users-value", `{"compatibility":"none"}`, 200, `{"compatibility":"NONE"}`},
		{"subject config", "GET", "/config/users-value", "", 200, `{"compatibilityLevel":"NONE"}`},
		{"NONE lets anything in", "POST", "/subjects/users-value/versions", body(userBad), 200, `{"id":3}`},
		{"delete subject config", "DELETE", "/config/users-value", "", 200, `{"compatibilityLevel":"NONE"}`},
		{"delete unset subject config", "DELETE", "/config/users-value", "", 404,
			`{"error_code":40408,"message":"Subject 'users-value' does not have subject-level compatibility configured"}`},
		{"set global", "PUT", "/config", `{"compatibility":"FULL_TRANSITIVE"}`, 200, `{"compatibility":"FULL_TRANSITIVE"}`},
		{"global set", "GET", "/config", "", 200, `{"compatibilityLevel":"FULL_TRANSITIVE"}`},
		{"reset global", "DELETE", "/config", "", 200, `{"compatibilityLevel":"FULL_TRANSITIVE"}`},
		{"global reset", "GET", "/config", "", 200, `{"compatibilityLevel":"BACKWARD"}`},

		{"soft delete version", "DELETE", "/subjects/users-value/versions/3", "", 200, `3`},
		{"soft-deleted version hidden", "GET", "/subjects/users-value/versions/3", "", 404, `{"error_code":40402,"message":"Version 3 not found."}`},
		{"soft-deleted version with deleted", "GET", "/subjects/users-value/versions/3?deleted=true", "", 200,
			`{"subject":"users-value","version":3,"id":3,"schema":` + quote(userBad) + `}`},
		{"soft-deleted still by id", "GET", "/schemas/ids/3", "", 200, `{"schema":` + quote(userBad) + `}`},
		{"versions without deleted", "GET", "/subjects/users-value/versions", "", 200, `[1,2]`},
		{"versions with deleted", "GET", "/subjects/users-value/versions?deleted=true", "", 200, `[1,2,3]`},
		{"soft delete twice", "DELETE", "/subjects/users-value/versions/3", "", 404,
			`{"error_code":40406,"message":"Subject 'users-value' Version 3 was soft deleted.Set permanent=true to delete permanently"}`},
		{"hard delete live version", "DELETE", "/subjects/users-value/versions/2?permanent=true", "", 404,
			`{"error_code":40407,"message":"Subject 'users-value' Version 2 was not deleted first before being permanently deleted"}`},
		{"hard delete", "DELETE", "/subjects/users-value/versions/3?permanent=true", "", 200, `3`},
		{"hard-deleted gone by id", "GET", "/schemas/ids/3", "", 404, `{"error_code":40403,"message":"Schema 3 not found"}`},
		{"hard-deleted gone with deleted", "GET", "/subjects/users-value/versions/3?deleted=true", "", 404, `{"error_code":40402,"message":"Version 3 not found."}`},

		{"other-value level", "PUT", "/config/other-value", `{"compatibility":"FULL"}`, 200, `{"compatibility":"FULL"}`},
		{"hard delete live subject", "DELETE", "/subjects/other-value?permanent=true", "", 404,
			`{"error_code":40405,"message":"Subject 'other-value' was not deleted first before being permanently deleted"}`},
		{"soft delete subject", "DELETE", "/subjects/other-value", "", 200, `[1]`},
		{"soft-deleted subject hidden", "GET", "/subjects", "", 200, `["users-value"]`},
		{"soft-deleted subject's level gone", "GET", "/config/other-value", "", 404,
			`{"error_code":40408,"message":"Subject 'other-value' does not have subject-level compatibility configured"}`},
		{"soft-deleted subject listed with deleted", "GET", "/subjects?deleted=true", "", 200, `["other-value","users-value"]`},
		{"soft-deleted subject versions", "GET", "/subjects/other-value/versions", "", 404, `{"error_code":40401,"message":"Subject 'other-value' not found."}`},
		{"soft delete subject twice", "DELETE", "/subjects/other-value", "", 404,
			`{"error_code":40404,"message":"Subject 'other-value' was soft deleted.Set permanent=true to delete permanently"}`},
		{"hard delete subject", "DELETE", "/subjects/other-value?permanent=true", "", 200, `[1]`},
		{"hard-deleted subject gone", "GET", "/subjects?deleted=true", "", 200, `["users-value"]`},
		{"id 1 still used by users-value", "GET", "/schemas/ids/1/versions", "", 200, `[{"subject":"users-value","version":1}]`},
		{"re-register after hard delete: same id", "POST", "/subjects/other-value/versions", body(userV1), 200, `{"id":1}`},
		{"versions restart", "GET", "/subjects/other-value/versions", "", 200, `[1]`},

		{"read-only", "PUT", "/mode", `{"mode":"READONLY"}`, 200, `{"mode":"READONLY"}`},
		{"read-only refuses", "POST", "/subjects/x/versions", body(userV1), 422, `{"error_code":42205,"message":"Subject x is in read-only mode"}`},
		{"read-only refuses a level", "PUT", "/config", `{"compatibility":"NONE"}`, 422, `{"error_code":42205,"message":"The registry is in read-only mode"}`},
		{"read-write", "PUT", "/mode", `{"mode":"READWRITE"}`, 200, `{"mode":"READWRITE"}`},
		{"subject mode", "GET", "/mode/users-value", "", 404,
			`{"error_code":40409,"message":"Subject 'users-value' does not have subject-level mode configured"}`},
		{"subject mode to global", "GET", "/mode/users-value?defaultToGlobal=true", "", 200, `{"mode":"READWRITE"}`},
	})
}

func TestRegistryErrors(t *testing.T) {
	s := newServer(t, "")
	run(t, s, []step{
		{"setup", "POST", "/subjects/s/versions", body(userV1), 200, `{"id":1}`},
		{"unknown subject", "GET", "/subjects/nope/versions", "", 404, `{"error_code":40401,"message":"Subject 'nope' not found."}`},
		{"unknown subject version", "GET", "/subjects/nope/versions/1", "", 404, `{"error_code":40401,"message":"Subject 'nope' not found."}`},
		{"unknown version", "GET", "/subjects/s/versions/7", "", 404, `{"error_code":40402,"message":"Version 7 not found."}`},
		{"version zero", "GET", "/subjects/s/versions/0", "", 422,
			`{"error_code":42202,"message":"The specified version '0' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\""}`},
		{"version word", "GET", "/subjects/s/versions/first", "", 422,
			`{"error_code":42202,"message":"The specified version 'first' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\""}`},
		{"unknown id", "GET", "/schemas/ids/42", "", 404, `{"error_code":40403,"message":"Schema 42 not found"}`},
		{"id not a number", "GET", "/schemas/ids/x", "", 404, `{"error_code":404,"message":"HTTP 404 Not Found"}`},
		{"lookup unknown schema", "POST", "/subjects/s", body(userV2), 404, `{"error_code":40403,"message":"Schema not found"}`},
		{"lookup unknown subject", "POST", "/subjects/nope", body(userV1), 404, `{"error_code":40401,"message":"Subject 'nope' not found."}`},
		{"delete unknown subject", "DELETE", "/subjects/nope", "", 404, `{"error_code":40401,"message":"Subject 'nope' not found."}`},
		{"delete unknown version", "DELETE", "/subjects/s/versions/9", "", 404, `{"error_code":40402,"message":"Version 9 not found."}`},
		{"incompatible", "POST", "/subjects/s/versions", body(userBad), 409,
			`{"error_code":409,"message":` + quote(`Schema being registered is incompatible with an earlier schema for subject "s", details: [`+
				`{errorType:'READER_INCOMPATIBLE', description:'The new schema cannot read data written with the old schema: reader field age is missing in writer schema and has no default'}, `+
				`{oldSchemaVersion: 1}, {oldSchema: '`+userV1+`'}, {compatibility: 'BACKWARD'}]`) + `}`},
		{"incompatible verbose check", "POST", "/compatibility/subjects/s/versions/1?verbose=true", body(userBad), 200,
			`{"is_compatible":false,"messages":[` +
				`"{errorType:'READER_INCOMPATIBLE', description:'The new schema cannot read data written with the old schema: reader field age is missing in writer schema and has no default'}",` +
				`"{oldSchemaVersion: 1}","{oldSchema: '` + strings.ReplaceAll(userV1, `"`, `\"`) + `'}","{compatibility: 'BACKWARD'}"]}`},
		{"not registered", "GET", "/subjects/s/versions", "", 200, `[1]`},
		{"invalid avro", "POST", "/subjects/s/versions", body(`{"type":"record","name":"X"}`), 422,
			`{"error_code":42201,"message":"Invalid schema of type AVRO, details: avro: record must have an array of fields"}`},
		{"not JSON", "POST", "/subjects/s/versions", body(`{"type":`), 422,
			`{"error_code":42201,"message":"Invalid schema of type AVRO, details: avro: unknown type: {\"type\":"}`},
		{"empty schema", "POST", "/subjects/s/versions", body(``), 422,
			`{"error_code":42201,"message":"Invalid schema of type AVRO, details: empty schema"}`},
		{"id asked for", "POST", "/subjects/s/versions", `{"schema":"\"int\"","id":7}`, 422, `{"error_code":42205,"message":"Subject s is not in import mode"}`},
		{"unknown type", "POST", "/subjects/s/versions", typedBody("XML", "<a/>"), 422, `{"error_code":422,"message":"Invalid schemaType XML"}`},
		{"malformed body", "POST", "/subjects/s/versions", `{"schema":`, 400, `{"error_code":400,"message":"Malformed request: unexpected EOF"}`},
		{"missing reference", "POST", "/subjects/t/versions", typedBody("AVRO", `{"type":"record","name":"T","fields":[{"name":"u","type":"User"}]}`, Reference{"User", "nope", 1}), 422,
			`{"error_code":42201,"message":"Invalid schema of type AVRO, details: reference \"User\": subject \"nope\" has no version 1"}`},
		{"bad level", "PUT", "/config", `{"compatibility":"SIDEWAYS"}`, 422,
			`{"error_code":42203,"message":"Invalid compatibility level \"SIDEWAYS\". Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive"}`},
		{"bad mode", "PUT", "/mode", `{"mode":"IMPORT"}`, 422,
			`{"error_code":42204,"message":"Invalid mode \"IMPORT\". Valid values are READWRITE and READONLY (this development registry does not implement IMPORT)"}`},
		{"unknown path", "GET", "/nothing/here", "", 404, `{"error_code":404,"message":"HTTP 404 Not Found"}`},
		{"wrong method", "DELETE", "/schemas/types", "", 405, `{"error_code":405,"message":"HTTP 405 Method Not Allowed"}`},
		{"root", "GET", "/", "", 200, `{}`},
	})
}

// TestServerCompatibilityLevels registers a chain of Avro schemas under each
// level: v1 {a}, v2 {a, b with default}, then a candidate, and checks which
// candidates each level accepts.
func TestRegistryCompatibilityLevels(t *testing.T) {
	const (
		v1 = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`
		v2 = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"int","default":0}]}`
		// dropA removes a field without a default: new readers can read
		// old data (they ignore a), old readers cannot read new data.
		dropA = `{"type":"record","name":"R","fields":[{"name":"b","type":"int","default":0}]}`
		// needC adds a field without a default: old readers can read
		// new data, new readers cannot read old data.
		needC = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"int","default":0},{"name":"c","type":"int"}]}`
		// widen turns b into a long: new readers read old ints, old
		// readers cannot read longs.
		widen = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"long","default":0}]}`
		// dropB drops v2's b: BACKWARD with v2, but under the transitive
		// levels compared with v1 too (fine: v1 has no b either).
		dropB = v1
	)
	for _, tc := range []struct {
		level     string
		candidate string
		ok        bool
	}{
		{"BACKWARD", dropA, true},
		{"BACKWARD", needC, false},
		{"BACKWARD", widen, true},
		{"FORWARD", dropA, false},
		{"FORWARD", needC, true},
		{"FORWARD", widen, false},
		{"FULL", dropA, false},
		{"FULL", needC, false},
		{"FULL", v2, true},
		{"NONE", needC, true},
		{"BACKWARD_TRANSITIVE", dropB, true},
		{"FORWARD_TRANSITIVE", dropB, true},
		{"FULL_TRANSITIVE", dropB, true},
	} {
		t.Run(tc.level+"/"+tc.candidate, func(t *testing.T) {
			s := newServer(t, "")
			want := `{"id":3}`
			status := 200
			if !tc.ok {
				status = 409
			}
			if tc.candidate == v2 || tc.candidate == dropB {
				want = `{"id":` + map[bool]string{true: "2", false: "1"}[tc.candidate == v2] + `}`
			}
			steps := []step{
				{"level", "PUT", "/config/s", `{"compatibility":"` + tc.level + `"}`, 200, `{"compatibility":"` + tc.level + `"}`},
				{"v1", "POST", "/subjects/s/versions", body(v1), 200, `{"id":1}`},
				{"v2", "POST", "/subjects/s/versions", body(v2), 200, `{"id":2}`},
				{"check", "POST", "/compatibility/subjects/s/versions", body(tc.candidate), 200, `{"is_compatible":` + map[bool]string{true: "true", false: "false"}[tc.ok] + `}`},
			}
			run(t, s, steps)
			req := httptest.NewRequest("POST", "/subjects/s/versions", strings.NewReader(body(tc.candidate)))
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != status {
				t.Fatalf("register: %d %s, want %d", rec.Code, rec.Body, status)
			}
			if tc.ok && strings.TrimSpace(rec.Body.String()) != want {
				t.Errorf("register: %s, want %s", rec.Body, want)
			}
		})
	}
}

// TestServerTransitive shows the difference between BACKWARD and
// BACKWARD_TRANSITIVE: v3 can read v2's data but not v1's.
func TestRegistryTransitive(t *testing.T) {
	const (
		v1 = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`
		v2 = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"int","default":0}]}`
		// v3 requires b (no default): v2 wrote it, v1 did not.
		v3 = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"int"}]}`
	)
	for level, want := range map[string]string{"BACKWARD": "true", "BACKWARD_TRANSITIVE": "false"} {
		t.Run(level, func(t *testing.T) {
			run(t, newServer(t, ""), []step{
				{"level", "PUT", "/config", `{"compatibility":"` + level + `"}`, 200, `{"compatibility":"` + level + `"}`},
				{"v1", "POST", "/subjects/s/versions", body(v1), 200, `{"id":1}`},
				{"v2", "POST", "/subjects/s/versions", body(v2), 200, `{"id":2}`},
				{"v3", "POST", "/compatibility/subjects/s/versions", body(v3), 200, `{"is_compatible":` + want + `}`},
				// Against one named version, the check is against that one.
				{"v3 against v2", "POST", "/compatibility/subjects/s/versions/2", body(v3), 200, `{"is_compatible":true}`},
			})
		})
	}
}

func TestRegistryReferences(t *testing.T) {
	const (
		address = `{"type":"record","name":"Address","namespace":"shop","fields":[{"name":"city","type":"string"}]}`
		order   = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"to","type":"shop.Address"}]}`
	)
	ref := Reference{Name: "shop.Address", Subject: "address", Version: 1}
	refLatest := Reference{Name: "shop.Address", Subject: "address", Version: -1}
	s := newServer(t, "")
	run(t, s, []step{
		{"unresolved name", "POST", "/subjects/order/versions", body(order), 422,
			`{"error_code":42201,"message":"Invalid schema of type AVRO, details: avro: unknown type: shop.Address"}`},
		{"address", "POST", "/subjects/address/versions", body(address), 200, `{"id":1}`},
		{"order", "POST", "/subjects/order/versions", typedBody("AVRO", order, ref), 200, `{"id":2}`},
		{"order with latest: same schema", "POST", "/subjects/order/versions", typedBody("AVRO", order, refLatest), 200, `{"id":2}`},
		{"references answered", "GET", "/subjects/order/versions/1", "", 200,
			`{"subject":"order","version":1,"id":2,"references":[{"name":"shop.Address","subject":"address","version":1}],"schema":` + quote(order) + `}`},
		{"by id", "GET", "/schemas/ids/2", "", 200,
			`{"references":[{"name":"shop.Address","subject":"address","version":1}],"schema":` + quote(order) + `}`},
		{"referenced by", "GET", "/subjects/address/versions/1/referencedby", "", 200, `[2]`},
		{"referenced: no delete", "DELETE", "/subjects/address/versions/1", "", 422,
			`{"error_code":42206,"message":"One or more references exist to the schema {magic=1,keytype=SCHEMA,subject=address,version=1}."}`},
		{"referenced: no subject delete", "DELETE", "/subjects/address", "", 422,
			`{"error_code":42206,"message":"One or more references exist to the schema {magic=1,keytype=SCHEMA,subject=address,version=1}."}`},
		{"delete the referrer", "DELETE", "/subjects/order", "", 200, `[1]`},
		{"then the referenced", "DELETE", "/subjects/address/versions/1", "", 200, `1`},
	})
}

func TestRegistryProtobuf(t *testing.T) {
	const (
		v1 = `syntax = "proto3"; package shop; message Order { string id = 1; int32 qty = 2; }`
		// v2 adds a field and widens qty (varint to varint): compatible.
		v2 = `syntax = "proto3"; package shop; message Order { string id = 1; int64 qty = 2; string note = 3; }`
		// bad turns qty into a string.
		bad      = `syntax = "proto3"; package shop; message Order { string id = 1; string qty = 2; }`
		imported = `syntax = "proto3"; package shop; import "money.proto"; message Price { Money amount = 1; }`
		money    = `syntax = "proto3"; package shop; message Money { int64 cents = 1; }`
	)
	run(t, newServer(t, ""), []step{
		{"v1", "POST", "/subjects/p/versions", typedBody("PROTOBUF", v1), 200, `{"id":1}`},
		{"v1 by id", "GET", "/schemas/ids/1", "", 200, `{"schemaType":"PROTOBUF","schema":` + quote(v1) + `}`},
		{"v1 version", "GET", "/subjects/p/versions/1", "", 200, `{"subject":"p","version":1,"id":1,"schemaType":"PROTOBUF","schema":` + quote(v1) + `}`},
		{"v2", "POST", "/subjects/p/versions", typedBody("PROTOBUF", v2), 200, `{"id":2}`},
		{"bad", "POST", "/compatibility/subjects/p/versions/latest?verbose=true", typedBody("PROTOBUF", bad), 200,
			`{"is_compatible":false,"messages":["{errorType:'READER_INCOMPATIBLE', description:'The new schema cannot read data written with the old schema: field shop.Order.qty (2) changed type from varint to string/bytes'}","{oldSchemaVersion: 2}","{oldSchema: '` + strings.ReplaceAll(v2, `"`, `\"`) + `'}","{compatibility: 'BACKWARD'}"]}`},
		{"syntax error", "POST", "/subjects/p/versions", typedBody("PROTOBUF", `message {`), 422,
			`{"error_code":42201,"message":"Invalid schema of type PROTOBUF, details: eddy-schema-registry-input.proto:1:9: syntax error: unexpected '{'"}`},
		{"money", "POST", "/subjects/money/versions", typedBody("PROTOBUF", money), 200, `{"id":3}`},
		{"import unresolved", "POST", "/subjects/price/versions", typedBody("PROTOBUF", imported), 422,
			`{"error_code":42201,"message":"Invalid schema of type PROTOBUF, details: eddy-schema-registry-input.proto:1:41: could not resolve path \"money.proto\": file does not exist"}`},
		{"import by reference", "POST", "/subjects/price/versions", typedBody("PROTOBUF", imported, Reference{"money.proto", "money", 1}), 200, `{"id":4}`},
		{"type change", "POST", "/subjects/p/versions", typedBody("AVRO", userV1), 409,
			`{"error_code":409,"message":"Schema being registered is incompatible with an earlier schema for subject \"p\", details: [{errorType:'READER_INCOMPATIBLE', description:'The new schema cannot read data written with the old schema: the schema type changed'}, {oldSchemaVersion: 2}, {oldSchema: '` + strings.ReplaceAll(v2, `"`, `\"`) + `'}, {compatibility: 'BACKWARD'}]"}`},
	})
}

func TestRegistryJSONSchema(t *testing.T) {
	const (
		v1 = `{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`
		// v2 adds an optional property: compatible.
		v2 = `{"type":"object","properties":{"id":{"type":"number"},"name":{"type":"string"}},"required":["id"]}`
		// bad requires name, which v2's writers may omit.
		bad = `{"type":"object","properties":{"id":{"type":"number"},"name":{"type":"string"}},"required":["id","name"]}`
	)
	run(t, newServer(t, ""), []step{
		{"v1", "POST", "/subjects/j/versions", typedBody("JSON", v1), 200, `{"id":1}`},
		{"v2", "POST", "/subjects/j/versions", typedBody("JSON", v2), 200, `{"id":2}`},
		{"v2 spaced: same", "POST", "/subjects/j/versions", typedBody("JSON", strings.ReplaceAll(v2, ",", ", ")), 200, `{"id":2}`},
		{"bad", "POST", "/compatibility/subjects/j/versions/latest?verbose=true", typedBody("JSON", bad), 200,
			`{"is_compatible":false,"messages":["{errorType:'READER_INCOMPATIBLE', description:'The new schema cannot read data written with the old schema: #: property name is required but the writer may omit it'}","{oldSchemaVersion: 2}","{oldSchema: '` + strings.ReplaceAll(v2, `"`, `\"`) + `'}","{compatibility: 'BACKWARD'}"]}`},
		{"narrowed", "POST", "/compatibility/subjects/j/versions/latest", typedBody("JSON", v1), 200, `{"is_compatible":false}`},
		{"invalid", "POST", "/subjects/j/versions", typedBody("JSON", `{"type":12}`), 422, ""},
	})
}

func TestRegistryBasicAuth(t *testing.T) {
	s := newServer(t, "", WithBasicAuth(map[string]string{"alice": "secret"}))
	for _, tc := range []struct {
		user, pass string
		status     int
	}{
		{"alice", "secret", 200},
		{"alice", "wrong", 401},
		{"bob", "secret", 401},
		{"", "", 401},
	} {
		req := httptest.NewRequest("GET", "/subjects", nil)
		if tc.user != "" {
			req.SetBasicAuth(tc.user, tc.pass)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != tc.status {
			t.Errorf("%s:%s: status %d, want %d", tc.user, tc.pass, rec.Code, tc.status)
		}
		if tc.status == 401 && rec.Body.String() != `{"error_code":401,"message":"Unauthorized"}`+"\n" {
			t.Errorf("401 body %q", rec.Body)
		}
	}
}

func TestRegistryPersistence(t *testing.T) {
	dir := t.TempDir()
	s1, err := NewServer(dir)
	if err != nil {
		t.Fatal(err)
	}
	run(t, s1, []step{
		{"v1", "POST", "/subjects/s/versions", body(userV1), 200, `{"id":1}`},
		{"v2", "POST", "/subjects/s/versions", body(userV2), 200, `{"id":2}`},
		{"other", "POST", "/subjects/o/versions", typedBody("JSON", `{"type":"string"}`), 200, `{"id":3}`},
		{"level", "PUT", "/config/s", `{"compatibility":"FULL"}`, 200, `{"compatibility":"FULL"}`},
		{"global", "PUT", "/config", `{"compatibility":"NONE"}`, 200, `{"compatibility":"NONE"}`},
		{"soft delete", "DELETE", "/subjects/o", "", 200, `[1]`},
	})
	s1.Close()

	s2 := newServer(t, dir)
	run(t, s2, []step{
		{"versions", "GET", "/subjects/s/versions", "", 200, `[1,2]`},
		{"v2", "GET", "/subjects/s/versions/2", "", 200, `{"subject":"s","version":2,"id":2,"schema":` + quote(userV2) + `}`},
		{"id 3", "GET", "/schemas/ids/3", "", 200, `{"schemaType":"JSON","schema":"{\"type\":\"string\"}"}`},
		{"subject level", "GET", "/config/s", "", 200, `{"compatibilityLevel":"FULL"}`},
		{"global level", "GET", "/config", "", 200, `{"compatibilityLevel":"NONE"}`},
		{"soft-deleted", "GET", "/subjects?deleted=true", "", 200, `["o","s"]`},
		{"live", "GET", "/subjects", "", 200, `["s"]`},
		// Ids continue: a new schema gets 4, not a reused number.
		{"new id", "POST", "/subjects/n/versions", body(`"string"`), 200, `{"id":4}`},
		{"same primitive spelled otherwise", "POST", "/subjects/n/versions", body(`{"type": "string"}`), 200, `{"id":4}`},
	})
}

func TestRegistryCorruptState(t *testing.T) {
	dir := t.TempDir()
	if err := saveState(dir, []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if _, err := NewServer(dir); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("NewServer on a corrupt file: %v", err)
	}
}

// TestServerConcurrentRegistrations registers the same schemas from many
// goroutines: every schema gets one id and one version.
func TestRegistryConcurrentRegistrations(t *testing.T) {
	s := newServer(t, t.TempDir())
	s.mu.Lock()
	s.st.Compatibility = compatNone
	s.mu.Unlock()
	var wg sync.WaitGroup
	ids := make([][]string, 8)
	for g := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				schema := `{"type":"enum","name":"E","symbols":["S` + string(rune('A'+i)) + `"]}`
				req := httptest.NewRequest("POST", "/subjects/e/versions", strings.NewReader(body(schema)))
				rec := httptest.NewRecorder()
				s.ServeHTTP(rec, req)
				ids[g] = append(ids[g], strings.TrimSpace(rec.Body.String()))
			}
		}()
	}
	wg.Wait()
	for g := range ids {
		if !reflect.DeepEqual(ids[g], ids[0]) {
			t.Fatalf("goroutine %d got ids %v, goroutine 0 %v", g, ids[g], ids[0])
		}
	}
	run(t, s, []step{{"ten versions", "GET", "/subjects/e/versions", "", 200, `[1,2,3,4,5,6,7,8,9,10]`}})
}

// TestRegistrySubjectMode: a subject's own mode (Confluent's /mode/{subject}
// and its error codes), which overrides the global one both ways and is
// persisted.
func TestRegistrySubjectMode(t *testing.T) {
	dir := t.TempDir()
	s1, err := NewServer(dir)
	if err != nil {
		t.Fatal(err)
	}
	run(t, s1, []step{
		{"v1", "POST", "/subjects/s/versions", body(userV1), 200, `{"id":1}`},
		{"no mode of its own", "GET", "/mode/s", "", 404,
			`{"error_code":40409,"message":"Subject 's' does not have subject-level mode configured"}`},
		{"the global mode applies", "GET", "/mode/s?defaultToGlobal=true", "", 200, `{"mode":"READWRITE"}`},
		{"delete no mode", "DELETE", "/mode/s", "", 404, `{"error_code":40401,"message":"Subject 's' not found."}`},
		{"invalid mode", "PUT", "/mode/s", `{"mode":"SIDEWAYS"}`, 422,
			`{"error_code":42204,"message":"Invalid mode \"SIDEWAYS\". Valid values are READWRITE and READONLY (this development registry does not implement IMPORT)"}`},
		{"read-only subject", "PUT", "/mode/s", `{"mode":"readonly"}`, 200, `{"mode":"READONLY"}`},
		{"its mode", "GET", "/mode/s", "", 200, `{"mode":"READONLY"}`},
		{"its mode, defaultToGlobal", "GET", "/mode/s?defaultToGlobal=true", "", 200, `{"mode":"READONLY"}`},
		{"the global mode unchanged", "GET", "/mode", "", 200, `{"mode":"READWRITE"}`},
		{"refuses a registration", "POST", "/subjects/s/versions", body(userV2), 422, `{"error_code":42205,"message":"Subject s is in read-only mode"}`},
		{"refuses a version delete", "DELETE", "/subjects/s/versions/1", "", 422, `{"error_code":42205,"message":"Subject s is in read-only mode"}`},
		{"refuses a subject delete", "DELETE", "/subjects/s", "", 422, `{"error_code":42205,"message":"Subject s is in read-only mode"}`},
		{"reads still answer", "POST", "/subjects/s", body(userV1), 200,
			`{"subject":"s","version":1,"id":1,"schema":` + quote(userV1) + `}`},
		{"other subjects take changes", "POST", "/subjects/o/versions", body(userV2), 200, `{"id":2}`},
		{"a mode before any version", "PUT", "/mode/later", `{"mode":"READONLY"}`, 200, `{"mode":"READONLY"}`},
		{"global read-only", "PUT", "/mode", `{"mode":"READONLY"}`, 200, `{"mode":"READONLY"}`},
		{"a read-write subject", "PUT", "/mode/o", `{"mode":"READWRITE"}`, 200, `{"mode":"READWRITE"}`},
	})
	s1.Close()

	s2 := newServer(t, dir)
	run(t, s2, []step{
		{"persisted", "GET", "/mode/s", "", 200, `{"mode":"READONLY"}`},
		{"persisted before any version", "GET", "/mode/later", "", 200, `{"mode":"READONLY"}`},
		{"no versions listed for it", "GET", "/subjects", "", 200, `["o","s"]`},
		{"a read-write subject takes changes in a read-only registry", "POST", "/subjects/o/versions", body(userV1), 200, `{"id":1}`},
		{"others do not", "POST", "/subjects/n/versions", body(userV1), 422, `{"error_code":42205,"message":"Subject n is in read-only mode"}`},
		{"global read-write", "PUT", "/mode", `{"mode":"READWRITE"}`, 200, `{"mode":"READWRITE"}`},
		{"s still read-only", "POST", "/subjects/s/versions", body(userV2), 422, `{"error_code":42205,"message":"Subject s is in read-only mode"}`},
		{"delete its mode", "DELETE", "/mode/s", "", 200, `{"mode":"READONLY"}`},
		{"gone", "GET", "/mode/s", "", 404, `{"error_code":40409,"message":"Subject 's' does not have subject-level mode configured"}`},
		{"s takes changes again", "POST", "/subjects/s/versions", body(userV2), 200, `{"id":2}`},
		{"delete the mode of a subject without versions", "DELETE", "/mode/later", "", 200, `{"mode":"READONLY"}`},
		{"o's mode", "GET", "/mode/o", "", 200, `{"mode":"READWRITE"}`},
		{"soft-deleting a subject deletes its mode", "DELETE", "/subjects/o", "", 200, `[1,2]`},
		{"o's mode gone", "GET", "/mode/o", "", 404, `{"error_code":40409,"message":"Subject 'o' does not have subject-level mode configured"}`},
	})
}
