package runtime

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/eddy-streams/eddy/internal/testutil"
	"github.com/eddy-streams/eddy/metrics"
)

// seriesValue returns the value of family name's series with label task=task,
// and whether it exists.
func seriesValue(t *testing.T, m *metrics.Metrics, name, task string) (float64, bool) {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, lp := range s.GetLabel() {
				if lp.GetName() == "task" && lp.GetValue() == task {
					return metricValue(s), true
				}
			}
		}
	}
	return 0, false
}

func metricValue(s *dto.Metric) float64 {
	switch {
	case s.Counter != nil:
		return s.Counter.GetValue()
	case s.Gauge != nil:
		return s.Gauge.GetValue()
	case s.Histogram != nil:
		return float64(s.Histogram.GetSampleCount())
	}
	return 0
}

// TestTaskMetrics runs the counting topology, wipes its state and runs it
// again: the restore gauge reads the offsets left at each progress report
// and 0 when done; running tasks have their counters and their database's
// figures; a task's series go when it closes.
func TestTaskMetrics(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	var log testutil.LogBuffer
	cfg := h.config(dir, &log)
	cfg.Metrics = metrics.New()
	h.produce(0, 200)
	stop := h.run(cfg)
	h.waitOutputs(200)
	for _, task := range []string{"0_0", "0_1"} {
		for _, name := range []string{"eddy_records_consumed_total", "eddy_records_produced_total", "eddy_changelog_records_produced_total", "eddy_process_latency_seconds"} {
			if v, ok := seriesValue(t, cfg.Metrics, name, task); !ok || v <= 0 {
				t.Errorf("task %s: %s = %v (present %v), want > 0 after 200 records", task, name, v, ok)
			}
		}
		if v, ok := seriesValue(t, cfg.Metrics, "eddy_state_bytes", task); !ok || v <= 0 {
			t.Errorf("task %s: eddy_state_bytes = %v (present %v), want > 0", task, v, ok)
		}
	}
	stop()
	for _, name := range []string{"eddy_records_consumed_total", "eddy_state_bytes", "eddy_restore_remaining_records"} {
		if _, ok := seriesValue(t, cfg.Metrics, name, "0_0"); ok {
			t.Errorf("%s{task=0_0} still reported after the tasks closed", name)
		}
	}

	if err := os.RemoveAll(filepath.Join(dir, cfg.AppID)); err != nil {
		t.Fatal(err)
	}
	cfg.Metrics = metrics.New()
	var mu sync.Mutex
	var reports []RestoreProgress
	var gauges []float64
	cfg.OnRestoreProgress = func(p RestoreProgress) {
		v, _ := seriesValue(t, cfg.Metrics, "eddy_restore_remaining_records", p.Task.String())
		mu.Lock()
		reports, gauges = append(reports, p), append(gauges, v)
		mu.Unlock()
	}
	stop = h.run(cfg)
	waitLog(t, &log, `msg="restored state"`, 2) // the first run had nothing to restore
	stop()
	mu.Lock()
	defer mu.Unlock()
	done := map[string]bool{}
	t.Logf("%d restore reports, gauges %v", len(reports), gauges)
	if len(reports) == 0 {
		t.Fatal("no restore progress was reported")
	}
	for i, p := range reports {
		if want := float64(p.Offsets - p.OffsetsDone); gauges[i] != want {
			t.Errorf("task %s at %d/%d offsets (done %v): gauge %v, want %v", p.Task, p.OffsetsDone, p.Offsets, p.Done, gauges[i], want)
		}
		if i == 0 && gauges[i] <= 0 {
			t.Errorf("first report: gauge %v, want the offsets to replay", gauges[i])
		}
		if p.Done {
			done[p.Task.String()] = true
		}
	}
	if len(done) != 2 {
		t.Errorf("restores reported done: %v, want both tasks", done)
	}
}
