package bench

import (
	"fmt"
	"math"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// stateReport summarizes an app's state figures from its metrics: the
// write buffers' cache and Pebble's block cache (hit ratios, memory), the
// LSM's shape summed or maxed over the tasks (level 0, read amplification,
// compaction debt, write stalls) and the process's peak RSS so far.
func stateReport(reg *prometheus.Registry) string {
	gathered, err := reg.Gather()
	if err != nil {
		return "metrics: " + err.Error()
	}
	families := make(map[string]*dto.MetricFamily, len(gathered))
	for _, f := range gathered {
		families[f.GetName()] = f
	}
	sum := func(name string, labels ...string) float64 { return sumMetric(families, name, labels...) }
	maxOf := func(name string) float64 {
		v := math.Inf(-1)
		for _, m := range families[name].GetMetric() {
			v = math.Max(v, value(m))
		}
		return v
	}
	mib := func(v float64) string { return fmt.Sprintf("%.0f MiB", v/(1<<20)) }
	var b strings.Builder
	fmt.Fprintf(&b, "buffer cache hit %.3f (%s of %s, %.0f evictions); ",
		sum("eddy_state_cache_hit_ratio"), mib(sum("eddy_state_memory_used_bytes", "part", "write_buffers")),
		mib(sum("eddy_state_memory_limit_bytes", "part", "write_buffers")), sum("eddy_state_cache_evictions_total"))
	fmt.Fprintf(&b, "block cache hit %.3f (%s + memtables %s of %s); ",
		sum("eddy_pebble_block_cache_hit_ratio"), mib(sum("eddy_state_memory_used_bytes", "part", "block_cache")),
		mib(sum("eddy_state_memory_used_bytes", "part", "memtables")), mib(sum("eddy_state_memory_limit_bytes", "part", "block_cache")))
	fmt.Fprintf(&b, "L0 files %.0f, L0 sublevels max %.0f, read amp max %.0f, compaction debt %s, write stalls %.0f, state on disk %s; peak RSS %s",
		sum("eddy_pebble_l0_files"), maxOf("eddy_pebble_l0_sublevels"), maxOf("eddy_pebble_read_amplification"),
		mib(sum("eddy_pebble_compaction_pending_bytes")), sum("eddy_pebble_write_stalls_total"), mib(sum("eddy_state_bytes")),
		mib(float64(peakRSS())))
	return b.String()
}

// sumMetric adds up the series of family name that carry labels (name,
// value pairs).
func sumMetric(families map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	var v float64
	for _, m := range families[name].GetMetric() {
		if hasLabels(m, labels) {
			v += value(m)
		}
	}
	return v
}

func hasLabels(m *dto.Metric, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == kv[i] && l.GetValue() == kv[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	}
	return 0
}
