package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/internal/testutil"
)

// instanceQueries is one instance of an app in these tests: it holds the
// keys of its own tasks and believes owners says who holds the others.
// The query routes are what is tested; eddy's own tests run them over
// real apps (app_query_test.go, internal/harness/demo).
type instanceQueries struct {
	self   string
	task   string // its one task
	data   map[string]int
	owners func(key string) string // the endpoint this instance believes owns key
	all    []string
	// fail, when set, is the error of every read of this instance's
	// state.
	fail error
}

func (q *instanceQueries) Stores() []StoreInfo { return []StoreInfo{{Name: "s", Kind: "key-value"}} }

func (q *instanceQueries) Get(_ context.Context, store, key string) (any, error) {
	if store != "s" {
		return nil, fmt.Errorf("%w %q; the stores are [s]", ErrUnknownStore, store)
	}
	if q.fail != nil {
		return nil, q.fail
	}
	if owner := q.owners(key); owner != q.self {
		if owner == "" {
			return nil, fmt.Errorf("%w: moving", ErrUnavailable)
		}
		return nil, &MovedError{Owner: owner}
	}
	v, ok := q.data[key]
	if !ok {
		return nil, fmt.Errorf("%w: no key %q", ErrNotFound, key)
	}
	return map[string]any{"v": v, "at": q.self}, nil
}

func (q *instanceQueries) Windows(_ context.Context, _, key string, from, to int64, everyTask bool) ([]Window, error) {
	if q.fail != nil {
		return nil, q.fail
	}
	if owner := q.owners(key); owner != q.self && !everyTask {
		return nil, &MovedError{Owner: owner}
	}
	return []Window{{Start: from, End: to, Value: key}}, nil
}

func (q *instanceQueries) Scan(_ context.Context, _ string, r KeyRange, limit int) (ScanResult, error) {
	if q.fail != nil {
		return ScanResult{}, q.fail
	}
	res := ScanResult{Tasks: []string{q.task}, Total: 2, Entries: []Entry{}}
	for k, v := range q.data {
		if r.Key != "" && k == r.Key || r.Key == "" && strings.HasPrefix(k, r.Prefix) {
			res.Entries = append(res.Entries, Entry{Key: k, Value: v, Raw: []byte(k)})
		}
	}
	return res, nil
}

func (q *instanceQueries) Endpoints(string) ([]string, string, error) { return q.all, q.self, nil }

// twoInstances starts two servers: a holds the keys starting with "a",
// b those starting with "b".
func twoInstances(t *testing.T) (a, b *instanceQueries, aURL, bURL string) {
	a = &instanceQueries{task: "0_0", data: map[string]int{"a1": 1, "a2": 2}}
	b = &instanceQueries{task: "0_1", data: map[string]int{"b1": 3, "a9x": 4}}
	sa, sb := httptest.NewServer(New(Options{Queries: a})), httptest.NewServer(New(Options{Queries: b}))
	t.Cleanup(sa.Close)
	t.Cleanup(sb.Close)
	a.self, b.self = strings.TrimPrefix(sa.URL, "http://"), strings.TrimPrefix(sb.URL, "http://")
	owners := func(key string) string {
		if strings.HasPrefix(key, "a") {
			return a.self
		}
		return b.self
	}
	a.owners, b.owners = owners, owners
	a.all, b.all = []string{a.self, b.self}, []string{a.self, b.self}
	return a, b, sa.URL, sb.URL
}

func getBody(t *testing.T, u string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestQueryGetForwards(t *testing.T) {
	a, b, aURL, bURL := twoInstances(t)
	for _, tc := range []struct {
		u, want string
		status  int
	}{
		{aURL + "/v1/stores/s/keys/a1", fmt.Sprintf(`{"at":%q,"v":1}`, a.self), 200},
		{aURL + "/v1/stores/s/keys/b1", fmt.Sprintf(`{"at":%q,"v":3}`, b.self), 200}, // forwarded to b
		{bURL + "/v1/stores/s/keys/a2", fmt.Sprintf(`{"at":%q,"v":2}`, a.self), 200},
		{bURL + "/v1/stores/s/keys/a404", `no key \"a404\"`, 404},
		{aURL + "/v1/stores/t/keys/a1", `unknown store \"t\"; the stores are [s]`, 404},
		{aURL + "/v1/stores/s/keys/" + url.PathEscape("b/x y"), `no key \"b/x y\"`, 404},
		// Produced with another partitioner: not where Kafka's default
		// puts it, found by asking every instance.
		{aURL + "/v1/stores/s/keys/a9x", `4`, 200},
		{bURL + "/v1/stores/s/keys/a9x", `4`, 200},
	} {
		status, h, body := getBody(t, tc.u)
		if status != tc.status || !strings.Contains(body, tc.want) || h.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s: %d %s, want %d with %s", tc.u, status, body, tc.status, tc.want)
		}
	}
	// Each believes the other owns "b1": the forwarded request is not
	// forwarded again, and the answer says to retry.
	b.owners = func(string) string { return a.self }
	status, h, body := getBody(t, aURL+"/v1/stores/s/keys/b1")
	if status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || !strings.Contains(body, "retry") {
		t.Errorf("a forwarding loop: %d %s (Retry-After %q), want a 503 with Retry-After", status, body, h.Get("Retry-After"))
	}
	a.owners = func(string) string { return "" }
	status, h, _ = getBody(t, aURL+"/v1/stores/s/keys/a1")
	if status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Errorf("no owner: %d, want a 503 with Retry-After", status)
	}
}

func TestQueryScanMerges(t *testing.T) {
	a, _, aURL, _ := twoInstances(t)
	status, _, body := getBody(t, aURL+"/v1/stores/s/keys?prefix=a")
	var res ScanResult
	if status != 200 || json.Unmarshal([]byte(body), &res) != nil {
		t.Fatalf("scan: %d %s", status, body)
	}
	var keys []string
	for _, e := range res.Entries {
		keys = append(keys, fmt.Sprint(e.Key))
	}
	if strings.Join(keys, ",") != "a1,a2,a9x" || len(res.Tasks) != 2 || strings.Contains(body, `"raw"`) {
		t.Fatalf("scan of both instances: %s", body)
	}
	status, _, body = getBody(t, aURL+"/v1/stores/s/keys?prefix=a&limit=2")
	if status != 200 || !strings.Contains(body, `"truncated":true`) || strings.Contains(body, "a9x") {
		t.Fatalf("scan with a limit: %d %s", status, body)
	}
	// An instance that does not answer leaves its task out: a 503, not a
	// partial answer.
	a.all = []string{a.self, "127.0.0.1:1"}
	status, h, body := getBody(t, aURL+"/v1/stores/s/keys?prefix=a")
	if status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || !strings.Contains(body, "1 of the store's 2 tasks") {
		t.Fatalf("scan missing an instance: %d %s", status, body)
	}
	for _, q := range []string{"prefix=a&from=b", "limit=0", "limit=x"} {
		if status, _, body := getBody(t, aURL+"/v1/stores/s/keys?"+q); status != 400 {
			t.Errorf("scan ?%s: %d %s, want 400", q, status, body)
		}
	}
}

func TestQueryWindowTimes(t *testing.T) {
	_, _, aURL, _ := twoInstances(t)
	status, _, body := getBody(t, aURL+"/v1/stores/s/keys/k/windows?from=2026-01-02T03:04:05Z&to=1767323045999")
	if status != 200 || !strings.Contains(body, `"start":1767323045000`) || !strings.Contains(body, `"end":1767323045999`) {
		t.Fatalf("windows: %d %s", status, body)
	}
	for _, q := range []string{"from=yesterday", "from=10&to=5"} {
		if status, _, body := getBody(t, aURL+"/v1/stores/s/keys/k/windows?"+q); status != 400 {
			t.Errorf("windows ?%s: %d %s, want 400", q, status, body)
		}
	}
}

// TestQueryErrorBodies checks what a client is told when a read fails:
// a transient failure (a task restoring) is a 503 with Retry-After; a
// corrupt state or an internal failure is a 500 without it, whose body
// says what happened without the files and Go types the error names,
// which go to the log instead. Asked directly or through the other
// instance (forwarded get, fanned-out scan, forwarded windows).
func TestQueryErrorBodies(t *testing.T) {
	const internal = "state/pebble: get /var/lib/eddy/ledger/0_0: pebble: checksum mismatch in 000012.sst; *sstable.Reader"
	for _, tc := range []struct {
		name      string
		err       error
		status    int
		retry     bool
		bodyWants string
	}{
		{"restoring", fmt.Errorf("%w: task 0_0 is restoring", ErrUnavailable), http.StatusServiceUnavailable, true, "restoring"},
		{"corrupt", fmt.Errorf("%w: %s", ErrCorrupt, internal), http.StatusInternalServerError, false, "corrupt"},
		{"internal", errors.New(internal), http.StatusInternalServerError, false, "log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _, aURL, bURL := twoInstancesLogged(t)
			a.fail = tc.err
			for _, u := range []string{
				aURL + "/v1/stores/s/keys/a1",       // read here
				bURL + "/v1/stores/s/keys/a1",       // forwarded to a
				aURL + "/v1/stores/s/keys?prefix=a", // a's part of a scan, here
				bURL + "/v1/stores/s/keys?prefix=a", // a's part, through b
				aURL + "/v1/stores/s/keys/a1/windows",
				bURL + "/v1/stores/s/keys/a1/windows", // forwarded to a
			} {
				status, h, body := getBody(t, u)
				if status != tc.status || (h.Get("Retry-After") != "") != tc.retry || !strings.Contains(body, tc.bodyWants) {
					t.Errorf("GET %s: %d (Retry-After %q) %s; want %d, Retry-After %v, a body with %q", u, status, h.Get("Retry-After"), body, tc.status, tc.retry, tc.bodyWants)
				}
				for _, leak := range []string{"/var/lib", "sst", "pebble", "*"} {
					if strings.Contains(body, leak) {
						t.Errorf("GET %s: the body %s shows %q", u, body, leak)
					}
				}
			}
			if !tc.retry && !strings.Contains(a.log.String(), "/var/lib/eddy/ledger/0_0") {
				t.Errorf("the full error is not in the instance's log: %q", a.log.String())
			}
		})
	}
}

// twoInstancesLogged is twoInstances whose a logs to a.log.
func twoInstancesLogged(t *testing.T) (a *loggedInstance, b *instanceQueries, aURL, bURL string) {
	a = &loggedInstance{instanceQueries: &instanceQueries{task: "0_0", data: map[string]int{"a1": 1}}}
	b = &instanceQueries{task: "0_1", data: map[string]int{"b1": 3}}
	logger := slog.New(slog.NewTextHandler(&a.log, nil))
	sa, sb := httptest.NewServer(New(Options{Queries: a, Logger: logger})), httptest.NewServer(New(Options{Queries: b}))
	t.Cleanup(sa.Close)
	t.Cleanup(sb.Close)
	a.self, b.self = strings.TrimPrefix(sa.URL, "http://"), strings.TrimPrefix(sb.URL, "http://")
	owners := func(key string) string {
		if strings.HasPrefix(key, "a") {
			return a.self
		}
		return b.self
	}
	a.owners, b.owners = owners, owners
	a.all, b.all = []string{a.self, b.self}, []string{a.self, b.self}
	return a, b, sa.URL, sb.URL
}

type loggedInstance struct {
	*instanceQueries
	log testutil.LogBuffer
}
