package eddy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/httpapi"
	"github.com/eddy-streams/eddy/serde"
)

// qAgg is the test's aggregate: how many records a key had, their sum.
type qAgg struct {
	Count int64 `json:"count"`
	Sum   int64 `json:"sum"`
}

const qWindow = 10 * time.Second

// queryTopology sums each key's values (store "sums") and, per 10s
// tumbling window, too (store "win"); every update goes to out.
func queryTopology(sums eddy.KeyValueStoreSpec[string, qAgg]) *eddy.Topology {
	t := eddy.NewTopology()
	in := eddy.Source(t, "in", serde.String(), serde.Int64())
	g := eddy.GroupByKey(in, serde.String())
	add := func(_ string, v int64, a qAgg) qAgg { return qAgg{Count: a.Count + 1, Sum: a.Sum + v} }
	agg := eddy.Aggregate(g, sums.StoreName(), func() qAgg { return qAgg{} }, add, serde.JSON[qAgg]())
	eddy.To(eddy.ToStream(agg), "out", serde.String(), serde.JSON[qAgg]())
	eddy.WindowAggregate(eddy.WindowedBy(g, eddy.TumblingWindows(qWindow).WithGrace(time.Hour)), "win", func() qAgg { return qAgg{} }, add, nil, serde.JSON[qAgg]())
	return t
}

// queryInstance is one app instance with its HTTP server.
type queryInstance struct {
	app    *eddy.App
	url    string
	cancel context.CancelFunc
	done   chan error
}

// startQueryInstance listens first, so that the endpoint the instance
// advertises is known before it joins the group.
func startQueryInstance(t *testing.T, topo *eddy.Topology, cfg eddy.Config) *queryInstance {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Endpoint = ln.Addr().String()
	cfg.StateDir = t.TempDir()
	app, err := eddy.New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	qi := &queryInstance{app: app, url: "http://" + cfg.Endpoint, cancel: cancel, done: make(chan error, 1)}
	served := make(chan error, 1)
	go func() { served <- httpapi.Serve(ctx, ln, app.Handler()) }()
	go func() {
		err := app.Run(ctx)
		cancel()
		<-served
		qi.done <- err
	}()
	t.Cleanup(func() { qi.stop(t) })
	return qi
}

func (qi *queryInstance) stop(t *testing.T) {
	if qi.cancel == nil {
		return
	}
	qi.cancel()
	qi.cancel = nil
	select {
	case err := <-qi.done:
		if err != nil {
			t.Errorf("instance %s: Run: %v", qi.url, err)
		}
	case <-time.After(hangGuard):
		t.Errorf("instance %s did not stop within %v", qi.url, hangGuard)
	}
}

// httpGet returns the status and body of GET u.
func httpGet(u string) (int, []byte, error) {
	resp, err := http.Get(u)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// eventually retries check until it returns nil, failing the test with
// its last error after the hang guard.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// queryRef is the state the input implies.
type queryRef struct {
	sums map[string]qAgg
	win  map[string]map[int64]qAgg // key → window start → aggregate
}

func (r *queryRef) add(key string, v, ts int64) {
	a := r.sums[key]
	r.sums[key] = qAgg{Count: a.Count + 1, Sum: a.Sum + v}
	if r.win[key] == nil {
		r.win[key] = map[int64]qAgg{}
	}
	start := ts - ts%qWindow.Milliseconds()
	w := r.win[key][start]
	r.win[key][start] = qAgg{Count: w.Count + 1, Sum: w.Sum + v}
}

// checkAll asks inst for every key, a prefix scan, a range scan and the
// windows of every key, and compares with ref.
func checkAll(inst *queryInstance, ref *queryRef) error {
	for key, want := range ref.sums {
		status, body, err := httpGet(inst.url + "/v1/stores/sums/keys/" + url.PathEscape(key))
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("GET %s: %d %s", key, status, body)
		}
		var got qAgg
		if err := json.Unmarshal(body, &got); err != nil || got != want {
			return fmt.Errorf("GET %s from %s: %s (%v), want %+v", key, inst.url, body, err, want)
		}
		status, body, err = httpGet(inst.url + "/v1/stores/win/keys/" + url.PathEscape(key) + "/windows?from=0&to=" + fmt.Sprint(int64(1)<<50))
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("GET %s windows: %d %s", key, status, body)
		}
		var ws struct {
			Windows []struct {
				Start, End int64
				Value      qAgg
			}
		}
		if err := json.Unmarshal(body, &ws); err != nil {
			return err
		}
		got2 := map[int64]qAgg{}
		for _, w := range ws.Windows {
			if w.End != w.Start+qWindow.Milliseconds() {
				return fmt.Errorf("window %+v: end is not start + size", w)
			}
			got2[w.Start] = w.Value
		}
		if !maps.Equal(got2, ref.win[key]) {
			return fmt.Errorf("windows of %s from %s: %v, want %v", key, inst.url, got2, ref.win[key])
		}
	}
	for _, tc := range []struct{ query, lo, hi string }{
		{"prefix=k1", "k1", "k2"},
		{"from=k05&to=k12", "k05", "k12"},
	} {
		status, body, err := httpGet(inst.url + "/v1/stores/sums/keys?limit=1000&" + tc.query)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("scan %s: %d %s", tc.query, status, body)
		}
		var res struct {
			Entries []struct {
				Key   string
				Value qAgg
			}
			Truncated bool
		}
		if err := json.Unmarshal(body, &res); err != nil {
			return err
		}
		var want, got []string
		for k, v := range ref.sums {
			if k >= tc.lo && k < tc.hi {
				want = append(want, fmt.Sprintf("%s=%+v", k, v))
			}
		}
		slices.Sort(want)
		for _, e := range res.Entries {
			got = append(got, fmt.Sprintf("%s=%+v", e.Key, e.Value))
		}
		if !slices.Equal(got, want) || res.Truncated {
			return fmt.Errorf("scan %s from %s: %v (truncated %v), want %v", tc.query, inst.url, got, res.Truncated, want)
		}
	}
	return nil
}

// TestInteractiveQueries runs three instances over six partitions, each
// with its own HTTP server, and checks that every instance answers for
// every key (forwarding to the owner), that scans return the union of the
// instances, that windows are fetched by key and time, and that all of it
// still holds after an instance left and its tasks moved.
func TestInteractiveQueries(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 6, "in", "out")
	sums := eddy.NewKeyValueStoreSpec("sums", serde.String(), serde.JSON[qAgg]())
	topo := queryTopology(sums)
	cfg := config(t, addr)
	var insts []*queryInstance
	for range 3 {
		insts = append(insts, startQueryInstance(t, topo, cfg))
	}

	ref := &queryRef{sums: map[string]qAgg{}, win: map[string]map[int64]qAgg{}}
	base := time.Now().Add(-time.Hour).Truncate(qWindow).UnixMilli()
	var recs []*kgo.Record
	produceRound := func(round int) {
		recs = recs[:0]
		for i := range 120 {
			key := fmt.Sprintf("k%02d", i%30)
			v := int64(i*7 + round)
			ts := base + int64(round)*qWindow.Milliseconds() + int64(i)*100
			ref.add(key, v, ts)
			recs = append(recs, &kgo.Record{Key: []byte(key), Value: i64(v), Timestamp: time.UnixMilli(ts)})
		}
		produce(t, addr, "in", recs...)
	}
	// With the table cache (on) out holds each key's latest sums, not
	// every update; the queries then read what out says.
	waitSums := func() {
		t.Helper()
		want := map[string]string{}
		for k, a := range ref.sums {
			b, err := serde.JSON[qAgg]().Serialize(nil, a)
			if err != nil {
				t.Fatal(err)
			}
			want[k] = string(b)
		}
		waitLast(t, addr, "out", want)
	}
	produceRound(0)
	waitSums()
	for _, inst := range insts {
		eventually(t, "queries to "+inst.url, func() error { return checkAll(inst, ref) })
	}

	// Errors name the problem.
	status, body, err := httpGet(insts[0].url + "/v1/stores/nope/keys/k00")
	if err != nil || status != http.StatusNotFound || !strings.Contains(string(body), `unknown store \"nope\"`) || !strings.Contains(string(body), "sums") {
		t.Errorf("unknown store: %d %s %v; want 404 naming the store and listing the stores", status, body, err)
	}
	status, body, err = httpGet(insts[1].url + "/v1/stores/sums/keys/absent")
	if err != nil || status != http.StatusNotFound || !strings.Contains(string(body), `no key \"absent\"`) {
		t.Errorf("absent key: %d %s %v; want 404", status, body, err)
	}
	status, body, err = httpGet(insts[1].url + "/v1/stores/win/keys/k00")
	if err != nil || status != http.StatusBadRequest || !strings.Contains(string(body), "window store") {
		t.Errorf("key lookup in a window store: %d %s %v; want 400 pointing to /windows", status, body, err)
	}

	// The Go API: a key's owner reads it; another instance says who owns it.
	kb := []byte("k07")
	var owner, other *queryInstance
	for _, inst := range insts {
		_, local, err := inst.app.KeyOwner("sums", kb)
		if err != nil {
			t.Fatal(err)
		}
		if local {
			owner = inst
		} else if other == nil {
			other = inst
		}
	}
	if owner == nil || other == nil {
		t.Fatalf("k07: owner %v, another %v", owner, other)
	}
	got, ok, err := eddy.QueryKeyValue(owner.app, sums).Get("k07")
	if err != nil || !ok || got != ref.sums["k07"] {
		t.Errorf("Get on the owner: %+v %v %v, want %+v", got, ok, err, ref.sums["k07"])
	}
	_, _, err = eddy.QueryKeyValue(other.app, sums).Get("k07")
	var nl *eddy.NotLocalError
	if !errors.As(err, &nl) || !errors.Is(err, eddy.ErrNotLocal) || "http://"+nl.Owner != owner.url {
		t.Errorf("Get elsewhere: %v; want a NotLocalError naming %s", err, owner.url)
	}
	var local []string
	for _, inst := range insts {
		for kv, err := range eddy.QueryKeyValue(inst.app, sums).Prefix("k") {
			if err != nil {
				t.Fatal(err)
			}
			local = append(local, kv.Key)
		}
	}
	slices.Sort(local)
	if want := slices.Sorted(maps.Keys(ref.sums)); !slices.Equal(local, want) {
		t.Errorf("the instances' local prefix scans: %v, want each key once: %v", local, want)
	}

	// An instance leaves: its tasks move to the others, which answer for
	// every key again, with the state of the input written since.
	insts[2].stop(t)
	insts = insts[:2]
	produceRound(1)
	waitSums()
	for _, inst := range insts {
		eventually(t, "queries to "+inst.url+" after an instance left", func() error { return checkAll(inst, ref) })
	}
}

// TestSessionLayoutWindowQueries: the windows route reads stores kept in
// the session layout: session windows (each session with its end) and
// sliding-window aggregates (listed as a window store, as before sliding
// windows kept window aggregates in a session store), with their values.
func TestSessionLayoutWindowQueries(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 2, "in", "out")
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "in", serde.String(), serde.Int64())
	g := eddy.GroupByKey(in, serde.String())
	sessions := eddy.WindowCount(eddy.WindowedBy(g, eddy.SessionWindowsWithGap(time.Second).WithGrace(time.Hour)), "sessions")
	eddy.WindowCount(eddy.WindowedBy(g, eddy.SlidingWindowsWithTimeDifference(time.Second).WithGrace(time.Hour)), "sliding")
	eddy.To(eddy.ToStream(sessions), "out", eddy.WindowedSerde(serde.String()), serde.Int64())
	inst := startQueryInstance(t, topo, config(t, addr))

	base := time.Now().Add(-time.Hour).Truncate(time.Minute).UnixMilli()
	// Two sessions of "k": [base, base+500] (2 records), [base+5000, base+5000] (1).
	var recs []*kgo.Record
	for _, at := range []int64{0, 500, 5000} {
		recs = append(recs, &kgo.Record{Key: []byte("k"), Value: i64(1), Timestamp: time.UnixMilli(base + at)})
	}
	produce(t, addr, "in", recs...)
	waitRecords(t, addr, "out", 3, nil)

	type window struct {
		Start, End int64
		Value      int64
	}
	get := func(store string) ([]window, error) {
		status, body, err := httpGet(inst.url + "/v1/stores/" + store + "/keys/k/windows?from=0&to=" + fmt.Sprint(int64(1)<<50))
		if err != nil {
			return nil, err
		}
		if status != http.StatusOK {
			return nil, fmt.Errorf("GET %s windows: %d %s", store, status, body)
		}
		var ws struct{ Windows []window }
		err = json.Unmarshal(body, &ws)
		return ws.Windows, err
	}
	eventually(t, "session windows", func() error {
		got, err := get("sessions")
		want := []window{{base, base + 500, 2}, {base + 5000, base + 5000, 1}}
		if err == nil && !slices.Equal(got, want) {
			err = fmt.Errorf("sessions %v, want %v", got, want)
		}
		return err
	})
	// Sliding windows of 1s: each record's window [t-1000, t], and the
	// window right after the first record that the second one falls in.
	eventually(t, "sliding windows", func() error {
		got, err := get("sliding")
		want := []window{
			{base - 1000, base, 1}, {base - 500, base + 500, 2}, {base + 1, base + 1001, 1}, {base + 4000, base + 5000, 1},
		}
		if err == nil && !slices.Equal(got, want) {
			err = fmt.Errorf("sliding %v, want %v", got, want)
		}
		return err
	})
}
