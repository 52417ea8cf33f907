package pipeline

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kgo"
)

// issueFamilies are the families issue 5 names; each must be served.
var issueFamilies = []string{
	"eddy_records_consumed_total",
	"eddy_records_produced_total",
	"eddy_process_latency_seconds",
	"eddy_commit_duration_seconds",
	"eddy_transactions_total",
	"eddy_consumer_lag_records",
	"eddy_restore_remaining_records",
	"eddy_late_records_dropped_total",
	"eddy_dlq_records_total",
	"eddy_state_bytes",
	// Pebble's own.
	"eddy_pebble_write_amplification",
	"eddy_pebble_flushes_total",
	"eddy_pebble_compactions_total",
	"eddy_pebble_compactions_in_progress",
	"eddy_pebble_compaction_pending_bytes",
	"eddy_pebble_write_stalls_total",
	"eddy_pebble_write_stall_seconds_total",
	"eddy_pebble_l0_files",
	"eddy_pebble_memtable_bytes",
	"eddy_pebble_block_cache_hit_ratio",
}

// scrape reads url's exposition.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

// total sums a family's series (counters and gauges; for a histogram, its
// sample counts), or returns -1 when the family is absent.
func total(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	mf := fams[name]
	if mf == nil {
		return -1
	}
	var sum float64
next:
	for _, m := range mf.GetMetric() {
		for i := 0; i < len(labels); i += 2 {
			ok := false
			for _, lp := range m.GetLabel() {
				ok = ok || lp.GetName() == labels[i] && lp.GetValue() == labels[i+1]
			}
			if !ok {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestMetricsUnderLoad runs the ledger with --http against an embedded
// broker while payments (and a few malformed ones) keep arriving, and
// checks that /metrics serves every family the issue names, and that the
// ones load must move do: counters grow from one scrape to the next.
func TestMetricsUnderLoad(t *testing.T) {
	b := startBroker(t)
	addr := freeAddr(t)
	stop := runLedger(t, b.Addr(), t.TempDir(), io.Discard, "--http", addr)
	defer stop()

	// The load: batches of payments over 200 accounts, every 50th
	// malformed (a dead letter), until the test ends.
	ctx, cancel := context.WithCancel(context.Background())
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("payments"))
		if err != nil {
			t.Error(err)
			return
		}
		defer cl.Close()
		for i := 0; ctx.Err() == nil; {
			recs := make([]*kgo.Record, 0, 200)
			for range 200 {
				i++
				r := payment(fmt.Sprint("p", i), fmt.Sprint("acct", i%200), 1)
				if i%50 == 0 {
					r = &kgo.Record{Key: []byte("acct0"), Value: []byte("{not json")}
				}
				recs = append(recs, r)
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil && ctx.Err() == nil {
				t.Error(err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() { cancel(); <-loaded }()

	url := "http://" + addr + "/metrics"
	// moving are the figures load must make positive.
	moving := []struct{ name, labels string }{
		{"eddy_records_consumed_total", ""},
		{"eddy_records_produced_total", ""},
		{"eddy_changelog_records_produced_total", ""},
		{"eddy_process_latency_seconds", ""},
		{"eddy_commit_duration_seconds", ""},
		{"eddy_transactions_total", "committed"},
		{"eddy_dlq_records_total", ""},
		{"eddy_state_bytes", ""},
		{"eddy_pebble_memtable_bytes", ""},
	}
	var first map[string]*dto.MetricFamily
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("no scrape had every family with live values in 2 minutes; last:\n%s", describe(first))
		}
		time.Sleep(500 * time.Millisecond)
		resp, err := http.Get(url)
		if err != nil {
			continue // not serving yet
		}
		resp.Body.Close()
		first = scrape(t, url)
		ready := true
		for _, name := range issueFamilies {
			ready = ready && first[name] != nil && len(first[name].GetMetric()) > 0
		}
		for _, m := range moving {
			ready = ready && value(first, m.name, m.labels) > 0
		}
		if ready {
			break
		}
	}
	// The ledger has one task per partition of payments.
	for p := range 4 {
		task := fmt.Sprint("0_", p)
		for _, name := range []string{"eddy_records_consumed_total", "eddy_restore_remaining_records", "eddy_late_records_dropped_total", "eddy_state_bytes", "eddy_pebble_l0_files"} {
			if total(first, name, "task", task) < 0 || !hasSeries(first, name, "task", task) {
				t.Errorf("%s has no series for task %s", name, task)
			}
		}
		if !hasSeries(first, "eddy_consumer_lag_records", "topic", "payments", "partition", fmt.Sprint(p)) {
			t.Errorf("eddy_consumer_lag_records has no series for payments/%d", p)
		}
		// Fresh state: nothing to restore; the ledger has no windows.
		if v := total(first, "eddy_restore_remaining_records", "task", task); v != 0 {
			t.Errorf("task %s: restore remaining %v, want 0 (fresh state)", task, v)
		}
	}
	if v := total(first, "eddy_late_records_dropped_total"); v != 0 {
		t.Errorf("late records dropped = %v; the ledger has no windowed operation", v)
	}
	if v := total(first, "eddy_transactions_total", "result", "aborted"); v < 0 {
		t.Error("no aborted series")
	}

	// Under load, the counters grow from one scrape to the next.
	grow := []string{"eddy_records_consumed_total", "eddy_records_produced_total", "eddy_process_latency_seconds", "eddy_commit_duration_seconds", "eddy_transactions_total"}
	deadline = time.Now().Add(2 * time.Minute)
	for {
		if time.Now().After(deadline) {
			t.Fatal("counters did not grow in 2 minutes of load")
		}
		time.Sleep(500 * time.Millisecond)
		second := scrape(t, url)
		grown := true
		for _, name := range grow {
			grown = grown && total(second, name) > total(first, name)
		}
		if grown {
			// Counters never go back while their tasks stay.
			for _, name := range []string{"eddy_records_consumed_total", "eddy_dlq_records_total", "eddy_changelog_records_produced_total"} {
				if total(second, name) < total(first, name) {
					t.Errorf("%s went back from %v to %v", name, total(first, name), total(second, name))
				}
			}
			t.Logf("consumed %v → %v, committed transactions %v → %v, dead letters %v",
				total(first, "eddy_records_consumed_total"), total(second, "eddy_records_consumed_total"),
				total(first, "eddy_transactions_total", "result", "committed"), total(second, "eddy_transactions_total", "result", "committed"),
				total(second, "eddy_dlq_records_total"))
			return
		}
	}
}

func value(fams map[string]*dto.MetricFamily, name, result string) float64 {
	if result != "" {
		return total(fams, name, "result", result)
	}
	return total(fams, name)
}

func hasSeries(fams map[string]*dto.MetricFamily, name string, labels ...string) bool {
	mf := fams[name]
	if mf == nil {
		return false
	}
next:
	for _, m := range mf.GetMetric() {
		for i := 0; i < len(labels); i += 2 {
			ok := false
			for _, lp := range m.GetLabel() {
				ok = ok || lp.GetName() == labels[i] && lp.GetValue() == labels[i+1]
			}
			if !ok {
				continue next
			}
		}
		return true
	}
	return false
}

func describe(fams map[string]*dto.MetricFamily) string {
	var sb strings.Builder
	for _, name := range issueFamilies {
		fmt.Fprintf(&sb, "  %s: %v\n", name, total(fams, name))
	}
	return sb.String()
}
