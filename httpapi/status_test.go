package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fakeStatus is a StatusReporter whose answer the test sets.
type fakeStatus struct {
	ready     bool
	reason    string
	restoring []string
}

func (f *fakeStatus) Status() any {
	return map[string]any{"app_id": "app", "ready": f.ready}
}

func (f *fakeStatus) Ready() (bool, string, []string) { return f.ready, f.reason, f.restoring }

type fakeTopology struct{}

func (fakeTopology) Describe() any { return map[string]any{"app_id": "app", "subtopologies": []any{}} }

func get(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// TestReadyz: 503 with the reason and the restoring tasks while the
// reporter says not ready, 200 once it is.
func TestReadyz(t *testing.T) {
	st := &fakeStatus{reason: "1 task(s) not running yet: 0_1", restoring: []string{"0_1"}}
	srv := httptest.NewServer(New(Options{Status: st}))
	defer srv.Close()

	code, h, body := get(t, srv.URL+"/readyz")
	var r readiness
	if err := json.Unmarshal([]byte(body), &r); err != nil || code != http.StatusServiceUnavailable ||
		r.Ready || r.Reason != st.reason || len(r.Restoring) != 1 || r.Restoring[0] != "0_1" {
		t.Fatalf("not ready: GET /readyz %d %q (%v), want 503 with the reason and 0_1", code, body, err)
	}
	if ct := h.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	st.ready, st.reason, st.restoring = true, "", nil
	if code, _, body := get(t, srv.URL+"/readyz"); code != http.StatusOK || !strings.Contains(body, `"ready": true`) {
		t.Fatalf("ready: GET /readyz %d %q, want 200", code, body)
	}
	if code, _, body := get(t, srv.URL+"/v1/status"); code != http.StatusOK || !strings.Contains(body, `"app_id": "app"`) {
		t.Fatalf("GET /v1/status %d %q", code, body)
	}
	// Parts not given are not served.
	for _, path := range []string{"/v1/topology", "/"} {
		if code, _, _ := get(t, srv.URL+path); code != http.StatusNotFound {
			t.Errorf("GET %s without its part: %d, want 404", path, code)
		}
	}
}

// TestUIAssets: the page and its assets are served from the binary, and
// nothing in them points off the server (users run air-gapped).
func TestUIAssets(t *testing.T) {
	srv := httptest.NewServer(New(Options{UI: true, Topology: fakeTopology{}}))
	defer srv.Close()
	code, h, page := get(t, srv.URL+"/")
	if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", code, h.Get("Content-Type"))
	}
	for _, asset := range []string{"ui/style.css", "ui/app.js"} {
		if !strings.Contains(page, `"`+asset+`"`) {
			t.Errorf("index.html does not load %s", asset)
		}
		code, _, body := get(t, srv.URL+"/"+asset)
		if code != http.StatusOK || body == "" {
			t.Errorf("GET /%s: %d", asset, code)
		}
		page += body
	}
	// The SVG namespace is a name, not a fetch.
	rest := strings.ReplaceAll(page, `"http://www.w3.org/2000/svg"`, "")
	for _, ref := range []string{"http://", "https://", "//cdn", "@import"} {
		if strings.Contains(rest, ref) {
			t.Errorf("the UI refers to %q: it must load nothing from elsewhere", ref)
		}
	}
	if code, _, _ := get(t, srv.URL+"/nope"); code != http.StatusNotFound {
		t.Errorf("GET /nope: %d, want 404", code)
	}
	if code, _, body := get(t, srv.URL+"/v1/topology"); code != http.StatusOK || !strings.Contains(body, "subtopologies") {
		t.Errorf("GET /v1/topology: %d %q", code, body)
	}
}
