package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/ledger/pipeline"
	"github.com/eddy-streams/eddy/httpapi"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/internal/testutil"
	"github.com/eddy-streams/eddy/kafkaclient"
)

// chromiumPath returns Debian's chromium, or skips the test when it is
// not installed, unless EDDY_REQUIRE_CHROMIUM is set (CI sets it, so CI
// never skips).
func chromiumPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err == nil {
		return path
	}
	if os.Getenv("EDDY_REQUIRE_CHROMIUM") != "" {
		t.Fatalf("EDDY_REQUIRE_CHROMIUM is set but chromium is not installed (%v); apt-get install -y chromium", err)
	}
	t.Skip("chromium is not installed (apt-get install -y chromium); set EDDY_REQUIRE_CHROMIUM=1 to make this a failure")
	return ""
}

// uiAccount is the account the lookup box asks for: it receives exactly
// uiPayments, before the steady load, and nothing else.
const uiAccount = "acct-ui"

var uiPayments = []int64{10, 20, 12} // seq 3, balance 42

// uiStateMemory is the app's state memory budget: the state memory panel
// must show its halves.
const uiStateMemory = 64 << 20

// TestUIInChromium runs the ledger in process under a steady load of
// payments, on a real embedded broker, serves its handler, and drives the
// web UI in headless Chromium: the charts fill with live data, the
// topology graph names the ledger's nodes and store, the tasks table lists
// its four tasks as running, and a lookup of an account shows its state.
// It saves a full-page screenshot (in the test's artifact directory, and
// at $EDDY_ARTIFACTS/ui.png when that is set).
func TestUIInChromium(t *testing.T) {
	chromium := chromiumPath(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	b, err := kafka.StartBroker(kafka.BrokerConfig{Addr: "127.0.0.1:0", DefaultPartitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	seeds := []string{b.Addr()}
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	err = kafkaclient.CreateTopics(ctx, admin, 4, "payments", "balances")
	admin.Close()
	if err != nil {
		t.Fatal(err)
	}
	var logs testutil.LogBuffer
	app, err := eddy.New(pipeline.Topology("payments", "balances"), eddy.Config{
		AppID: "ledger", Brokers: seeds, StateDir: t.TempDir(), InstanceID: "ui-test", StateMemory: uiStateMemory,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); _ = httpapi.Serve(ctx, ln, app.Handler()) }()
	go func() {
		defer wg.Done()
		if err := app.Run(ctx); err != nil {
			t.Errorf("app: %v", err)
		}
	}()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("payments"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i, amount := range uiPayments {
		v, _ := json.Marshal(pipeline.Payment{ID: fmt.Sprintf("ui-%d", i), Account: uiAccount, Amount: amount})
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(uiAccount), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	go func() { defer wg.Done(); steadyLoad(ctx, cl) }()
	defer func() {
		cancel()
		wg.Wait()
		if t.Failed() {
			t.Logf("app log:\n%s", logs.String())
		}
	}()

	actx, acancel := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.WindowSize(1440, 1000),
		// A container's /dev/shm is often too small for Chromium.
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()))
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatalf("open %s/ in chromium: %v", base, err)
	}

	// eval polls a JavaScript expression until ok accepts its value.
	eval := func(what, expr string, ok func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(3 * time.Minute)
		var last string
		for {
			v, err := chromedp.Run(bctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
			if err == nil {
				last = v
				if ok(v) {
					return v
				}
			} else {
				last = err.Error()
			}
			if time.Now().After(deadline) {
				shot(t, bctx)
				t.Fatalf("%s: still %q after 3 minutes", what, last)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	atLeast := func(n float64) func(string) bool {
		return func(v string) bool {
			var f float64
			_, err := fmt.Sscan(v, &f)
			return err == nil && f >= n
		}
	}

	// The page reads the app's status: the app is ready, its four tasks run.
	eval("readiness pill", `document.getElementById("ready").dataset.ready`, func(v string) bool { return v == "true" })
	eval("running tasks in the table", `String(document.querySelectorAll('#tasks-body tr[data-state="running"]').length)`, atLeast(4))
	ids := eval("task ids", `[...document.querySelectorAll('#tasks-body tr')].map(r => r.dataset.task + ":" + r.dataset.state).join(",")`,
		func(string) bool { return true })
	if want := "0_0:running,0_1:running,0_2:running,0_3:running"; ids != want {
		t.Errorf("tasks table %s, want %s", ids, want)
	}

	// The topology graph names the ledger's source, processor, store and sink.
	graph := eval("topology graph", `[...document.querySelectorAll('#topology [data-name]')].map(n => n.dataset.name).join(",")`,
		func(v string) bool { return v != "" })
	for _, want := range []string{"source-payments-0", "process-ledger-1", "sink-balances-2", pipeline.StoreName} {
		if !slices.Contains(strings.Split(graph, ","), want) {
			t.Errorf("topology graph has nodes %s, want %s among them", graph, want)
		}
	}
	text := eval("topology text", `document.getElementById("topology").textContent`, func(v string) bool { return v != "" })
	for _, want := range []string{"payments", "balances", "ledger-balances-changelog"} {
		if !strings.Contains(text, want) {
			t.Errorf("topology graph text %q does not mention %s", text, want)
		}
	}

	// Live charts: points accumulate from /metrics (and the store sizes
	// from /metrics or /v1/status); throughput and state sizes are above zero.
	metricsServed := served(t, base+"/metrics")
	if metricsServed {
		// Fifteen points: a screenshot with some history to look at.
		eval("throughput points", `document.getElementById("chart-throughput").dataset.points`, atLeast(15))
		eval("throughput peak", `document.getElementById("chart-throughput").dataset.max`, func(v string) bool { return atLeast(1)(v) })
		eval("lag points", `document.getElementById("chart-lag").dataset.points`, atLeast(5))
		eval("commit latency points", `document.getElementById("chart-commit").dataset.points`, atLeast(5))
		eval("commit latency peak", `document.getElementById("chart-commit").dataset.max`, func(v string) bool {
			var f float64
			_, err := fmt.Sscan(v, &f)
			return err == nil && f > 0
		})
		checkMemoryPanel(t, eval)
	} else {
		t.Log("GET /metrics is not served on this branch: the throughput, lag, commit charts and the state memory panel must say so")
		for _, id := range []string{"chart-throughput", "chart-lag", "chart-commit", "memory"} {
			eval(id+" unavailable note", `document.getElementById("`+id+`").dataset.state`, func(v string) bool { return v == "unavailable" })
		}
	}
	eval("store size points", `document.getElementById("chart-state").dataset.points`, atLeast(5))
	eval("store size peak", `document.getElementById("chart-state").dataset.max`, atLeast(1))

	// The lookup box: type the account, submit, read the answer.
	lookupPath := "/v1/stores/" + pipeline.StoreName + "/keys/" + uiAccount
	queriesServed := served(t, base+lookupPath)
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.ID("lookup-store"), pipeline.StoreName),
		chromedp.SendKeys(chromedp.ID("lookup-key"), uiAccount),
	); err != nil {
		t.Fatal(err)
	}
	if queriesServed {
		// Submit until the answer shows all of the account's payments:
		// the lookup may come before the ledger processed the third.
		eval("lookup answer", `(async () => {
			document.querySelector('#lookup button').click();
			await new Promise(r => setTimeout(r, 300));
			const out = document.getElementById("lookup-result");
			return out.dataset.state + " " + out.textContent;
		})()`, func(v string) bool {
			return strings.HasPrefix(v, "ok ") && strings.Contains(v, `"seq": 3`) && strings.Contains(v, `"balance": 42`)
		})
	} else {
		t.Logf("GET %s is not served on this branch: the lookup box must say so", lookupPath)
		if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#lookup button"))); err != nil {
			t.Fatal(err)
		}
		eval("lookup unavailable", `document.getElementById("lookup-result").dataset.state`, func(v string) bool { return v == "unavailable" })
	}
	shot(t, bctx)
}

// checkMemoryPanel checks the state memory panel of a ledger running with
// uiStateMemory: each half of the budget is shown as the limit of its
// meter and the whole as the total's, the write buffers and the memtables
// hold something, the parts add up to the total, and the write buffers'
// cache answers some reads (the load pays 200 accounts over and over).
// The block cache may have seen no lookup yet (the memtables and the
// write buffers answer this small state): its ratio is then empty, never
// a figure out of [0, 1].
func checkMemoryPanel(t *testing.T, eval func(what, expr string, ok func(string) bool) string) {
	t.Helper()
	type meter struct {
		State, Used, Limit, HitRatio, Figs string
		// Parts are the bar's segments: their widths (% of the bar)
		// and the bytes they stand for.
		Parts, Bytes map[string]float64
	}
	read := func(id string) meter {
		t.Helper()
		v := eval(id+" meter", `JSON.stringify((() => {
			const m = document.getElementById("`+id+`");
			const parts = {}, bytes = {};
			for (const p of m.querySelectorAll(".bar [data-part]")) {
				parts[p.dataset.part] = parseFloat(p.style.width);
				bytes[p.dataset.part] = parseFloat(p.dataset.bytes);
			}
			return {State: m.dataset.state || "", Used: m.dataset.used || "", Limit: m.dataset.limit || "",
				HitRatio: m.dataset.hitRatio || "", Figs: m.querySelector(".meter-figs").textContent, Parts: parts, Bytes: bytes};
		})())`, func(v string) bool { return strings.Contains(v, `"State":"live"`) })
		var m meter
		if err := json.Unmarshal([]byte(v), &m); err != nil {
			t.Fatalf("%s meter: %v in %s", id, err, v)
		}
		return m
	}
	num := func(what, s string) float64 {
		t.Helper()
		var f float64
		if _, err := fmt.Sscan(s, &f); err != nil {
			t.Errorf("%s: %q is not a number", what, s)
		}
		return f
	}
	eval("state memory panel", `document.getElementById("memory").dataset.state`, func(v string) bool { return v == "live" })
	// The write buffers hold the accounts' balances once they were read.
	eval("write buffers in use", `document.getElementById("mem-write-buffers").dataset.used`, func(v string) bool {
		var f float64
		_, err := fmt.Sscan(v, &f)
		return err == nil && f > 0
	})
	buffers, cache, total := read("mem-write-buffers"), read("mem-block-cache"), read("mem-total")
	t.Logf("state memory panel: write buffers %s (hit ratio %s), block cache and memtables %s (hit ratio %q), all %s",
		buffers.Figs, buffers.HitRatio, cache.Figs, cache.HitRatio, total.Figs)
	half := float64(uiStateMemory / 2)
	if l := num("write buffers' limit", buffers.Limit); l != half {
		t.Errorf("write buffers' limit %v, want half the budget, %v", l, half)
	}
	if l := num("block cache's limit", cache.Limit); l != uiStateMemory-half {
		t.Errorf("block cache's limit %v, want the other half, %v", l, uiStateMemory-half)
	}
	if l := num("total limit", total.Limit); l != uiStateMemory {
		t.Errorf("total limit %v, want the budget, %d", l, uiStateMemory)
	}
	for _, m := range []meter{buffers, cache} {
		if !strings.HasSuffix(m.Figs, "/ 32.0 MiB") {
			t.Errorf("meter shows %q, want used / 32.0 MiB", m.Figs)
		}
	}
	if cache.Bytes["memtables"] <= 0 {
		t.Errorf("block cache meter has no memtables segment: %v (the four task databases have memtables)", cache.Bytes)
	}
	// The meters are read one after another while the figures move, so
	// the total is checked against its own bar: one segment per part, the
	// write buffers and the memtables among them, their bytes adding up to
	// the used figure, together as wide as it is of the budget.
	u := num("total used", total.Used)
	var width, bytes float64
	for part, w := range total.Parts {
		width += w
		bytes += total.Bytes[part]
	}
	if total.Bytes["write_buffers"] <= 0 || total.Bytes["memtables"] <= 0 || bytes != u {
		t.Errorf("total bar segments of %v bytes, want write buffers and memtables among them, %v bytes together", total.Bytes, u)
	}
	if want := 100 * u / max(u, uiStateMemory); u <= 0 || math.Abs(width-want) > 0.1 {
		t.Errorf("total bar segments %v%% wide, together %.2f%%, want %.2f%% (%v bytes used of %d)", total.Parts, width, want, u, uiStateMemory)
	}
	if r := num("write buffers' hit ratio", buffers.HitRatio); r <= 0 || r > 1 {
		t.Errorf("write buffers' hit ratio %v, want in (0, 1]: the load reads its 200 accounts over and over", r)
	}
	if cache.HitRatio != "" {
		if r := num("block cache hit ratio", cache.HitRatio); r < 0 || r > 1 {
			t.Errorf("block cache hit ratio %v, want in [0, 1]", r)
		}
	}
}

// served reports whether the handler serves path (a 404 in plain text is
// the mux's "not served"; a JSON 404 is an answer).
func served(t *testing.T, url string) bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode != http.StatusNotFound || strings.Contains(resp.Header.Get("Content-Type"), "json")
}

// steadyLoad produces payments to 200 accounts, 50 every 50ms, until ctx
// ends.
func steadyLoad(ctx context.Context, cl *kgo.Client) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		recs := make([]*kgo.Record, 50)
		for i := range recs {
			acct := fmt.Sprintf("acct-%03d", n%200)
			v, _ := json.Marshal(pipeline.Payment{ID: fmt.Sprintf("p-%d", n), Account: acct, Amount: int64(n%7 + 1)})
			recs[i] = &kgo.Record{Key: []byte(acct), Value: v}
			n++
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond) // the broker is busy: try the next batch
		}
	}
}

// shot saves a full-page screenshot of the page as ui.png in the test's
// artifact directory and, when EDDY_ARTIFACTS is set, there too.
func shot(t *testing.T, ctx context.Context) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	dirs := []string{t.ArtifactDir()}
	if d := os.Getenv("EDDY_ARTIFACTS"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Errorf("screenshot: %v", err)
			continue
		}
		p := filepath.Join(d, "ui.png")
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Errorf("screenshot: %v", err)
			continue
		}
		t.Logf("screenshot: %s (%d bytes)", p, len(png))
	}
}
