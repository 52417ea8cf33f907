package eddy

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddy-streams/eddy/serde"
)

// TestAppRegistry: each app has its own registry, served by its Handler
// on /metrics with the user's collectors beside eddy's.
func TestAppRegistry(t *testing.T) {
	topo := NewTopology()
	Count(GroupByKey(Source(topo, "in", serde.String(), serde.String()), serde.String()), "counts")
	cfg := Config{AppID: "app", Brokers: []string{"127.0.0.1:1"}, StateDir: t.TempDir()}
	a, err := New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.Registry() == b.Registry() {
		t.Fatal("two apps share a registry")
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "my_orders_total", Help: "the user's own"})
	c.Add(3)
	a.Registry().MustRegister(c)

	get := func(app *App) string {
		rec := httptest.NewRecorder()
		app.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if rec.Code != 200 {
			t.Fatalf("GET /metrics: %d", rec.Code)
		}
		body, _ := io.ReadAll(rec.Body)
		return string(body)
	}
	body := get(a)
	for _, want := range []string{"my_orders_total 3", `eddy_transactions_total{result="committed"} 0`, "eddy_commit_duration_seconds_bucket"} {
		if !strings.Contains(body, want) {
			t.Errorf("a's /metrics lacks %q", want)
		}
	}
	if strings.Contains(get(b), "my_orders_total") {
		t.Error("b serves a's collector")
	}
}
