package dashboards

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/eddy-streams/eddy/metrics"
	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/pebble"
)

// exportedByEddy gathers the families an app's registry serves once a task
// runs with a Pebble database: the runtime's calls, made by hand, on the
// real collectors and a real database.
func exportedByEddy(t *testing.T) map[string]dto.MetricType {
	t.Helper()
	m := metrics.New()
	b := pebble.New(pebble.Options{})
	defer b.Close()
	db, err := b.Open(filepath.Join(t.TempDir(), "0_0"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Apply(&state.Batch{Writes: []state.Write{{Store: "s", Key: []byte("k"), Value: []byte("v")}}, Offsets: state.NewOffsets()}); err != nil {
		t.Fatal(err)
	}
	task := m.Task("0_0")
	defer task.Close()
	task.Lag("payments", 0).Set(1)
	m.Misplaced("payments", 0).Inc()
	task.Latency.ObserveBatch(time.Millisecond, 10)
	m.ObserveCommit(time.Millisecond, true)
	m.SetBackend(b)
	m.SetStateCache(state.NewCacheBudget(1 << 20))
	defer m.AddDB("0_0", db)()

	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]dto.MetricType, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf.GetType()
	}
	return out
}

// TestEddyDashboard: every expression of eddy.json parses and reads
// metrics that eddy exports.
func TestEddyDashboard(t *testing.T) {
	exported := exportedByEddy(t)
	if err := Check(Eddy(), exported); err != nil {
		t.Fatal(err)
	}
	names, err := Names(Eddy())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the dashboard reads %d metrics: %s", len(names), strings.Join(names, " "))
	// The families all have a panel.
	read := map[string]bool{}
	for _, n := range names {
		read[n] = true
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(n, s); ok {
				read[base] = true
			}
		}
	}
	for _, f := range []string{
		"eddy_records_consumed_total", "eddy_records_produced_total", "eddy_process_latency_seconds",
		"eddy_commit_duration_seconds", "eddy_transactions_total", "eddy_consumer_lag_records",
		"eddy_restore_remaining_records", "eddy_late_records_dropped_total", "eddy_dlq_records_total",
		"eddy_state_bytes", "eddy_pebble_write_amplification", "eddy_pebble_compactions_total",
		"eddy_pebble_compactions_in_progress", "eddy_pebble_compaction_pending_bytes",
		"eddy_pebble_write_stalls_total", "eddy_pebble_write_stall_seconds_total", "eddy_pebble_flushes_total",
		"eddy_pebble_l0_files", "eddy_pebble_memtable_bytes", "eddy_pebble_block_cache_hit_ratio",
		// Issue 14's state memory budget.
		"eddy_state_memory_limit_bytes", "eddy_state_memory_used_bytes", "eddy_state_cache_hits_total",
		"eddy_state_cache_misses_total", "eddy_state_cache_evictions_total", "eddy_state_cache_hit_ratio",
	} {
		if !read[f] {
			t.Errorf("no panel reads %s", f)
		}
	}
}

// TestEddyDashboardLayout: commit latency sits beside compactions and
// write stalls, consumer lag beside throughput, the state memory budget
// beside the write buffers' cache (same row of the grid).
func TestEddyDashboardLayout(t *testing.T) {
	var d struct {
		Panels []struct {
			Title   string             `json:"title"`
			GridPos struct{ X, Y int } `json:"gridPos"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(Eddy(), &d); err != nil {
		t.Fatal(err)
	}
	row := map[string]int{}
	for _, p := range d.Panels {
		row[p.Title] = p.GridPos.Y
	}
	for _, group := range [][]string{
		{"Commit latency", "Compactions", "Write stalls and compaction debt"},
		{"Consumer lag", "Throughput"},
		{"State memory", "Write buffers' cache"},
	} {
		for _, title := range group {
			y, ok := row[title]
			if !ok {
				t.Fatalf("no panel %q", title)
			}
			if y != row[group[0]] {
				t.Errorf("panel %q is on row y=%d, %q on y=%d; they belong side by side", title, y, group[0], row[group[0]])
			}
		}
	}
}

// The check fails for a panel or variable that names a metric eddy does
// not export, or misuses a suffix, or does not parse.
func TestCheckFindsUnknownMetrics(t *testing.T) {
	exported := map[string]dto.MetricType{
		"eddy_records_consumed_total":  dto.MetricType_COUNTER,
		"eddy_commit_duration_seconds": dto.MetricType_HISTOGRAM,
		"rpc_seconds":                  dto.MetricType_SUMMARY,
	}
	dash := func(exprs ...string) []byte {
		type target struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		}
		var ts []target
		for i, e := range exprs {
			ts = append(ts, target{string(rune('A' + i)), e})
		}
		b, _ := json.Marshal(map[string]any{"panels": []any{
			map[string]any{"type": "row", "title": "row", "panels": []any{
				map[string]any{"title": "nested", "targets": ts},
			}},
		}})
		return b
	}
	good := []string{
		`rate(eddy_records_consumed_total[5m])`,
		`histogram_quantile(0.9, sum by (le) (rate(eddy_commit_duration_seconds_bucket[5m])))`,
		`eddy_commit_duration_seconds_sum / eddy_commit_duration_seconds_count`,
		`rpc_seconds_sum / rpc_seconds_count`,
	}
	if err := Check(dash(good...), exported); err != nil {
		t.Fatalf("good dashboard: %v", err)
	}
	for _, tc := range []struct{ expr, want string }{
		{`rate(eddy_records_consumed[5m])`, "eddy_records_consumed is not a metric eddy exports"},
		{`eddy_records_consumed_total_bucket`, "eddy_records_consumed_total_bucket is not"},
		{`rpc_seconds_bucket`, "rpc_seconds_bucket is not"},
		{`eddy_commit_duration_seconds_total`, "eddy_commit_duration_seconds_total is not"},
		{`sum(rate(eddy_records_consumed_total[5m])) / sum(rate(eddy_records_producd_total[5m]))`, "eddy_records_producd_total is not"},
		{`ratee(eddy_records_consumed_total[5m])`, "unknown function ratee"},
		{`sum by (le) (1)`, "reads no metric"},
	} {
		err := Check(dash(append(good, tc.expr)...), exported)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `panel "nested" target E`) {
			t.Errorf("%s: error %v, want one naming panel \"nested\" target E and containing %q", tc.expr, err, tc.want)
		}
	}

	vars := func(query any) []byte {
		b, _ := json.Marshal(map[string]any{
			"panels":     []any{map[string]any{"title": "p", "targets": []any{map[string]any{"refId": "A", "expr": good[0]}}}},
			"templating": map[string]any{"list": []any{map[string]any{"name": "v", "type": "query", "query": query}}},
		})
		return b
	}
	for _, q := range []any{
		"label_values(eddy_records_consumed_total, instance)",
		map[string]any{"query": "label_values(eddy_records_consumed_total, task)", "refId": "v"},
		"label_values(instance)",
		"query_result(sum by (task) (eddy_records_consumed_total))",
	} {
		if err := Check(vars(q), exported); err != nil {
			t.Errorf("variable %v: %v", q, err)
		}
	}
	for _, q := range []any{
		"label_values(eddy_unknown, instance)",
		map[string]any{"query": "label_values(eddy_unknown, task)"},
		"query_result(eddy_unknown)",
	} {
		if err := Check(vars(q), exported); err == nil || !strings.Contains(err.Error(), "variable v: eddy_unknown is not") {
			t.Errorf("variable %v: error %v, want one naming eddy_unknown", q, err)
		}
	}
	if err := Check([]byte(`{"panels": []}`), exported); err == nil {
		t.Error("a dashboard without expressions passed the check")
	}
	if err := Check([]byte(`not json`), exported); err == nil {
		t.Error("a file that is not JSON passed the check")
	}
}
