package eddy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/ledger/pipeline"
)

// readyz is a GET /readyz: its status code and body.
type readyz struct {
	code int
	body struct {
		Ready     bool     `json:"ready"`
		Reason    string   `json:"reason"`
		Restoring []string `json:"restoring"`
	}
}

func getReadyz(t *testing.T, url string) readyz {
	t.Helper()
	var r readyz
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r.code = resp.StatusCode
	if err := json.NewDecoder(resp.Body).Decode(&r.body); err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	return r
}

func getStatus(t *testing.T, url string) eddy.Status {
	t.Helper()
	var s eddy.Status
	resp, err := http.Get(url + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("GET /v1/status: %v", err)
	}
	return s
}

// waitReady polls /readyz until it answers 200.
func waitReady(t *testing.T, url string) readyz {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		r := getReadyz(t, url)
		if r.code == http.StatusOK {
			if !r.body.Ready {
				t.Fatalf("GET /readyz: 200 with ready false: %+v", r.body)
			}
			return r
		}
		if r.code != http.StatusServiceUnavailable || r.body.Ready || r.body.Reason == "" {
			t.Fatalf("GET /readyz: %d %+v, want 503 with a reason while not ready", r.code, r.body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after %v: %+v", hangGuard, r.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReadyzFollowsRestore runs the ledger, then, with its state directory
// deleted, runs it again: its tasks restore from the changelog. Each
// task's first restore report holds the restore back until the test has
// seen /readyz answer 503 naming that task and /v1/status show it
// restoring with its progress; then /readyz turns 200 with every task
// running. No timing decides anything: the restore waits for the test.
func TestReadyzFollowsRestore(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 4, "payments", "balances")
	var recs []*kgo.Record
	for i := 0; i < 400; i++ {
		acct := fmt.Sprintf("acct-%02d", i%40)
		v, _ := json.Marshal(pipeline.Payment{ID: fmt.Sprint(i), Account: acct, Amount: 1})
		recs = append(recs, srec(acct, string(v)))
	}
	produce(t, addr, "payments", recs...)
	cfg := config(t, addr)
	topo := pipeline.Topology("payments", "balances")

	first, err := eddy.New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(first.Handler())
	if r := getReadyz(t, srv.URL); r.code != http.StatusServiceUnavailable || r.body.Reason == "" {
		t.Errorf("before Run: GET /readyz %d %+v, want 503 with a reason", r.code, r.body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	waitRecords(t, addr, "balances", len(recs), nil)
	waitReady(t, srv.URL)
	s := getStatus(t, srv.URL)
	var running []string
	for _, ts := range s.Tasks {
		if ts.State == eddy.TaskRunning && ts.Worker == 0 {
			running = append(running, ts.ID)
		}
		if ts.StateBytes <= 0 || len(ts.Stores) != 1 || ts.Stores[0].Name != pipeline.StoreName {
			t.Errorf("task %s: %d bytes on disk, stores %+v", ts.ID, ts.StateBytes, ts.Stores)
		}
		if ts.StreamTime == nil {
			t.Errorf("task %s has processed records but no stream time", ts.ID)
		}
	}
	if !slices.Equal(running, []string{"0_0", "0_1", "0_2", "0_3"}) || !s.Ready || s.State != "running" {
		t.Errorf("status: state %s, ready %v, running tasks %v; want running, ready, 0_0..0_3", s.State, s.Ready, running)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if err := os.RemoveAll(filepath.Join(cfg.StateDir, cfg.AppID)); err != nil {
		t.Fatal(err)
	}

	// The second run restores every task from the changelog. A task's
	// first report (the restore's start) waits until the test lets it go.
	var (
		mu      sync.Mutex
		held    = map[eddy.TaskID]bool{}
		restore = make(chan eddy.TaskID, 4)
		release = make(chan struct{})
	)
	cfg.OnRestoreProgress = func(p eddy.RestoreProgress) {
		mu.Lock()
		first := !held[p.Task] && !p.Done
		held[p.Task] = true
		mu.Unlock()
		if first {
			restore <- p.Task
			<-release
		}
	}
	second, err := eddy.New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv = httptest.NewServer(second.Handler())
	defer srv.Close()
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go func() { done <- second.Run(ctx) }()
	var id eddy.TaskID
	select {
	case id = <-restore:
	case <-time.After(hangGuard):
		close(release)
		t.Fatalf("no restore began within %v", hangGuard)
	}
	r := getReadyz(t, srv.URL)
	if r.code != http.StatusServiceUnavailable || r.body.Ready || !slices.Contains(r.body.Restoring, id.String()) {
		t.Errorf("while task %s restores: GET /readyz %d %+v, want 503 naming it", id, r.code, r.body)
	}
	s = getStatus(t, srv.URL)
	found := false
	for _, ts := range s.Tasks {
		if ts.ID != id.String() {
			continue
		}
		found = true
		if ts.State != eddy.TaskRestoring || ts.Restore == nil || ts.Restore.Offsets <= 0 || ts.Restore.Percent >= 100 {
			t.Errorf("while task %s restores, /v1/status shows it %s with restore %+v", id, ts.State, ts.Restore)
		}
	}
	if !found || s.Ready {
		t.Errorf("while task %s restores: status lists it: %v, ready: %v", id, found, s.Ready)
	}
	close(release)
	r = waitReady(t, srv.URL)
	s = getStatus(t, srv.URL)
	running = running[:0]
	for _, ts := range s.Tasks {
		if ts.State == eddy.TaskRunning {
			running = append(running, ts.ID)
		}
	}
	if !slices.Equal(running, []string{"0_0", "0_1", "0_2", "0_3"}) {
		t.Errorf("after the restore, running tasks %v, want 0_0..0_3", running)
	}
	mu.Lock()
	if len(held) != 4 {
		t.Errorf("%d tasks reported a restore, want all 4 (the state directory was deleted)", len(held))
	}
	mu.Unlock()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := second.Status(); s.State != "stopped" || s.Ready {
		t.Errorf("after Run returned: state %s, ready %v", s.State, s.Ready)
	}
}
