package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// gather returns the registry's families by name.
func gather(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// series returns the metric of family name whose labels are labels
// (name=value pairs), or nil.
func series(fams map[string]*dto.MetricFamily, name string, labels ...string) *dto.Metric {
	mf := fams[name]
	if mf == nil {
		return nil
	}
next:
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		if len(got) != len(labels)/2 {
			continue
		}
		for i := 0; i < len(labels); i += 2 {
			if got[labels[i]] != labels[i+1] {
				continue next
			}
		}
		return m
	}
	return nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return -2
}

func TestTaskSeries(t *testing.T) {
	m := New()
	tk := m.Task("0_1")
	tk.Consumed.Add(5)
	tk.Produced.Add(3)
	tk.Changelog.Add(2)
	tk.LateDropped.Add(1)
	tk.DeadLetters.Add(4)
	tk.TimeRefused.Add(6)
	tk.RestoreRemaining.Set(7)
	tk.Lag("payments", 1).Set(9)
	tk.Latency.ObserveBatch(10*time.Microsecond, 10)

	fams := gather(t, m)
	for name, want := range map[string]float64{
		"eddy_records_consumed_total":           5,
		"eddy_records_produced_total":           3,
		"eddy_changelog_records_produced_total": 2,
		"eddy_late_records_dropped_total":       1,
		"eddy_dlq_records_total":                4,
		"eddy_time_refused_records_total":       6,
		"eddy_restore_remaining_records":        7,
	} {
		if got := value(series(fams, name, "task", "0_1")); got != want {
			t.Errorf("%s{task=0_1} = %v, want %v", name, got, want)
		}
	}
	if got := value(series(fams, "eddy_consumer_lag_records", "topic", "payments", "partition", "1")); got != 9 {
		t.Errorf("lag = %v, want 9", got)
	}
	if h := series(fams, "eddy_process_latency_seconds", "task", "0_1"); h == nil || h.Histogram.GetSampleCount() != 10 {
		t.Errorf("latency histogram = %v, want 10 samples", h)
	}

	// A second open of the same task (a move between two workers of the
	// process) shares the series; they go when both closed.
	again := m.Task("0_1")
	if again != tk {
		t.Fatal("Task returned new children for an open task")
	}
	tk.Close()
	if series(gather(t, m), "eddy_records_consumed_total", "task", "0_1") == nil {
		t.Fatal("series deleted while the task is still open once")
	}
	again.Close()
	fams = gather(t, m)
	for _, name := range []string{"eddy_records_consumed_total", "eddy_restore_remaining_records", "eddy_consumer_lag_records", "eddy_process_latency_seconds"} {
		if mf := fams[name]; mf != nil && len(mf.GetMetric()) > 0 {
			t.Errorf("%s still has %d series after the task closed", name, len(mf.GetMetric()))
		}
	}
	// Reopened, it starts from zero.
	if got := value(series(gather(t, New()), "eddy_records_consumed_total", "task", "0_1")); got != -1 {
		t.Errorf("fresh metrics have a series: %v", got)
	}
	re := m.Task("0_1")
	defer re.Close()
	if got := value(series(gather(t, m), "eddy_records_consumed_total", "task", "0_1")); got != 0 {
		t.Errorf("reopened task's counter = %v, want 0", got)
	}
}

func TestTransactions(t *testing.T) {
	m := New()
	m.ObserveCommit(20*time.Millisecond, true)
	m.ObserveCommit(30*time.Millisecond, true)
	m.ObserveCommit(40*time.Millisecond, false)
	m.ObserveAbort()
	fams := gather(t, m)
	if got := value(series(fams, "eddy_transactions_total", "result", "committed")); got != 2 {
		t.Errorf("committed = %v, want 2", got)
	}
	if got := value(series(fams, "eddy_transactions_total", "result", "aborted")); got != 2 {
		t.Errorf("aborted = %v, want 2", got)
	}
	h := series(fams, "eddy_commit_duration_seconds")
	if h == nil || h.Histogram.GetSampleCount() != 3 || h.Histogram.GetSampleSum() < 0.089 || h.Histogram.GetSampleSum() > 0.091 {
		t.Errorf("commit histogram = %v, want 3 samples summing to 0.09", h)
	}
}

// The per-poll updates the runtime makes allocate nothing.
func TestTaskUpdatesDoNotAllocate(t *testing.T) {
	m := New()
	tk := m.Task("0_0")
	defer tk.Close()
	lag := tk.Lag("in", 0)
	allocs := testing.AllocsPerRun(1000, func() {
		tk.Consumed.Add(100)
		tk.Produced.Add(100)
		tk.LateDropped.Add(1)
		tk.Latency.ObserveBatch(time.Millisecond, 100)
		lag.Set(3)
		tk.RestoreRemaining.Set(0)
	})
	if allocs != 0 {
		t.Fatalf("per-poll updates allocate %v times", allocs)
	}
}

// Two apps in one process have their own registries.
func TestRegistriesAreSeparate(t *testing.T) {
	a, b := New(), New()
	a.Task("0_0").Consumed.Add(1)
	if got := value(series(gather(t, b), "eddy_records_consumed_total", "task", "0_0")); got != -1 {
		t.Fatalf("b sees a's series: %v", got)
	}
	if err := a.Registry().Register(prometheus.NewCounter(prometheus.CounterOpts{Name: "user_total", Help: "a user's counter"})); err != nil {
		t.Fatalf("register a user collector: %v", err)
	}
	if gather(t, a)["user_total"] == nil {
		t.Fatal("the user's collector is not gathered")
	}
}

func TestHandler(t *testing.T) {
	m := New()
	m.Task("0_0").Consumed.Add(42)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `eddy_records_consumed_total{task="0_0"} 42`) {
		t.Fatalf("exposition lacks the counter:\n%s", body)
	}
	if !strings.Contains(string(body), "go_goroutines") {
		t.Fatal("exposition lacks the Go collector")
	}
}
