package httpapi_test

import (
	"context"
	"encoding/json"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/httpapi"
	"github.com/eddy-streams/eddy/serde"
)

// everyOperator is a topology that uses each operator of the DSL once
// (a foreign-key join and Suppress included),
// for the graph test: every node of its description must be drawn.
func everyOperator() *eddy.Topology {
	topo := eddy.NewTopology()
	str, i64 := serde.String(), serde.Int64()
	orders := eddy.Source(topo, "orders", str, str)
	logs := eddy.SourcePattern(topo, regexp.MustCompile(`logs-.*`), str, str)
	clean := eddy.FilterNot(eddy.Filter(orders, func(_, v string) bool { return v != "" }), func(_, v string) bool { return v == "x" })
	sp := eddy.Split(clean, "size")
	big := sp.Branch("big", func(_, v string) bool { return len(v) > 10 })
	small := sp.Default()
	eddy.Foreach(big, func(string, string) {})
	words := eddy.FlatMapValues(eddy.Peek(small, func(string, string) {}), func(dst []string, _, v string) []string { return append(dst, strings.Fields(v)...) })
	lengths := eddy.MapValues(words, func(_, w string) int64 { return int64(len(w)) })
	byWord := eddy.GroupBy(words, func(_, w string) string { return w }, "by-word", str, str)
	counts := eddy.Count(byWord, "word-counts")
	eddy.To(eddy.ToStream(eddy.FilterTable(counts, func(_ string, n int64) bool { return n > 1 }, eddy.Materialize("repeated", str, i64))), "repeated", str, i64)
	perKey := eddy.GroupByKey(lengths, str)
	cg := eddy.CogroupWith(eddy.Cogroup(perKey, func(_ string, n, agg int64) int64 { return agg + n }),
		eddy.GroupByKey(eddy.Named(logs, "log-lines"), str), func(_, _ string, agg int64) int64 { return agg + 1 })
	totals := eddy.CogroupAggregate(cg, "totals", func() int64 { return 0 }, i64)
	windowed := eddy.WindowCount(eddy.WindowedBy(perKey, eddy.TumblingWindows(time.Minute)), "per-minute")
	finals := eddy.Suppress(windowed, "per-minute-final", eddy.UntilWindowCloses(eddy.BufferConfig{}), eddy.WindowedSerde(str), i64)
	eddy.To(eddy.Map(eddy.ToStream(finals), func(k eddy.Windowed[string], n int64) (string, int64) { return k.Key, n }), "per-minute", str, i64)
	customers := eddy.TableFrom(topo, "customers", "customers", str, str)
	latest := eddy.ToTable(orders, "latest-order", str, str)
	joined := eddy.JoinTables(latest, totals, eddy.LeftJoin, func(_, o string, _ bool, n int64, _ bool) string { return o })
	eddy.To(eddy.ToStream(eddy.MapTableValues(joined, func(_, v string) int64 { return int64(len(v)) })), "joined", str, i64)
	eddy.To(eddy.JoinStreamTable(orders, latest, eddy.InnerJoin, func(_, o, l string, _ bool) string { return o + l }), "enriched", str, str)
	withRegion := eddy.JoinTablesOnForeignKey(latest, customers, "order-customer", func(_, o string) string { return o }, eddy.LeftJoin,
		func(_, o, region string, _ bool) string { return o + "@" + region })
	eddy.To(eddy.ToStream(withRegion), "with-region", str, str)
	return topo
}

// TestUIDrawsEveryOperator serves the handler of an app built from
// everyOperator (not run: the graph needs only the description) to headless
// Chromium, and checks that the topology graph draws every node and store
// of the description with a label, and links every repartition topic.
func TestUIDrawsEveryOperator(t *testing.T) {
	chromium := chromiumPath(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	topo := everyOperator()
	app, err := eddy.New(topo, eddy.Config{AppID: "every", Brokers: []string{"127.0.0.1:1"}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	desc := topo.Describe("every")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = httpapi.Serve(ctx, ln, app.Handler()) }()
	defer func() { cancel(); wg.Wait() }()

	actx, acancel := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.WindowSize(1440, 1000),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()))
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	if err := chromedp.Do(bctx, chromedp.Navigate("http://"+ln.Addr().String()+"/")); err != nil {
		t.Fatalf("open the UI in chromium: %v", err)
	}
	// The graph is drawn once /v1/topology answers: wait for it, then read
	// each node's name and label, and each store's name.
	var drawn string
	deadline := time.Now().Add(time.Minute)
	for {
		var err error
		drawn, err = chromedp.Run(bctx, chromedp.Evaluate[string](`JSON.stringify({
			nodes: [...document.querySelectorAll('#topology g.node')].map(g => [g.dataset.name, g.querySelector('text').textContent]),
			stores: [...document.querySelectorAll('#topology g.store')].map(g => g.dataset.name),
			repartitions: document.getElementById('topology').dataset.repartitions || ''})`))
		if err == nil && !strings.Contains(drawn, `"nodes":[]`) {
			break
		}
		if time.Now().After(deadline) {
			shot(t, bctx)
			t.Fatalf("no topology graph after a minute: %s (%v)", drawn, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var graph struct {
		Nodes        [][2]string
		Stores       []string
		Repartitions string
	}
	if err := json.Unmarshal([]byte(drawn), &graph); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	for _, n := range graph.Nodes {
		labels[n[0]] = n[1]
	}
	var want, stores []string
	for _, sub := range desc.Subtopologies {
		for _, n := range sub.Nodes {
			want = append(want, n.Name)
			if label, ok := labels[n.Name]; !ok {
				t.Errorf("node %s (%s) is not drawn", n.Name, n.Kind)
			} else if strings.TrimSpace(label) == "" {
				t.Errorf("node %s (%s, topic %q, pattern %q) is drawn without a label", n.Name, n.Kind, n.Topic, n.Pattern)
			}
		}
		for _, st := range sub.Stores {
			stores = append(stores, st.Name)
		}
	}
	if len(graph.Nodes) != len(want) {
		t.Errorf("%d nodes drawn, want the description's %d", len(graph.Nodes), len(want))
	}
	slices.Sort(stores)
	slices.Sort(graph.Stores)
	if !slices.Equal(graph.Stores, stores) {
		t.Errorf("stores drawn %v, want %v", graph.Stores, stores)
	}
	if want := len(desc.RepartitionTopics); want == 0 || graph.Repartitions != strconv.Itoa(want) {
		t.Errorf("%s repartition links drawn, want %d (%v)", graph.Repartitions, want, desc.RepartitionTopics)
	}
	shot(t, bctx)
}
