package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestBatchHistogram(t *testing.T) {
	m := New()
	tk := m.Task("0_0")
	defer tk.Close()
	// 10 records in 25µs: 2.5µs each, counted 10 times in the bucket
	// whose bound is the first at or above 2.5µs (3.2µs).
	tk.Latency.ObserveBatch(25*time.Microsecond, 10)
	// 1 record in 1s: above every bound.
	tk.Latency.ObserveBatch(time.Second, 1)
	tk.Latency.ObserveBatch(time.Second, 0) // nothing processed: ignored

	h := series(gather(t, m), "eddy_process_latency_seconds", "task", "0_0").GetHistogram()
	if h.GetSampleCount() != 11 {
		t.Fatalf("count = %d, want 11", h.GetSampleCount())
	}
	if sum := h.GetSampleSum(); sum < 1.000024 || sum > 1.000026 {
		t.Fatalf("sum = %v, want 1.000025", sum)
	}
	for _, b := range h.GetBucket() {
		want := uint64(0)
		if b.GetUpperBound() >= 2.5e-6 {
			want = 10
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%g: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
}

// The choice the runtime made: observing every record would cost two
// clock reads and an Observe per record; observing per poll costs them
// once per task and poll. Run with -bench to see both on your machine.
func BenchmarkPerRecord(b *testing.B) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x", Buckets: latencyBuckets})
	for b.Loop() {
		start := time.Now()
		h.Observe(time.Since(start).Seconds())
	}
}

// BenchmarkPerPoll is the cost per record of ObserveBatch for a poll of
// 500 records (the ledger's polls hold hundreds to thousands).
func BenchmarkPerPoll(b *testing.B) {
	m := New()
	o := m.Task("0_0").Latency
	const poll = 500
	i := 0
	var start time.Time
	for b.Loop() {
		if i%poll == 0 {
			start = time.Now()
		}
		i++
		if i%poll == 0 {
			o.ObserveBatch(time.Since(start), poll)
		}
	}
}
