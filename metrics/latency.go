package metrics

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// batchHistogram is a histogram family with one label whose children take
// a batch of observations at once: n records that took d together count n
// times at d/n. client_golang's histograms observe one value at a time, and
// the runtime cannot afford clock reads per record (BenchmarkPerRecord:
// two time.Now and an Observe cost 130-280ns on the project's shared
// machine, a sixteenth to an eighth of a core at 500,000 records/s), so it
// times a task's records per poll and observes them here.
type batchHistogram struct {
	desc   *prometheus.Desc
	bounds []float64 // upper bounds, seconds
	nanos  []int64   // the same, in nanoseconds, searched per batch

	mu       sync.Mutex // children: task open and close, scrapes
	children map[string]*LatencyObserver
}

func newBatchHistogram(name, help, label string, bounds []float64) *batchHistogram {
	h := &batchHistogram{
		desc:     prometheus.NewDesc(name, help, []string{label}, nil),
		bounds:   bounds,
		children: make(map[string]*LatencyObserver),
	}
	for _, b := range bounds {
		h.nanos = append(h.nanos, int64(b*1e9))
	}
	return h
}

// LatencyObserver is one task's child of eddy_process_latency_seconds.
type LatencyObserver struct {
	h *batchHistogram
	// counts[i] counts observations in (bounds[i-1], bounds[i]]; the last
	// one those above every bound. sum is in nanoseconds.
	counts []atomic.Uint64
	sum    atomic.Uint64
}

func (h *batchHistogram) child(label string) *LatencyObserver {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.children[label]
	if c == nil {
		c = &LatencyObserver{h: h, counts: make([]atomic.Uint64, len(h.bounds)+1)}
		h.children[label] = c
	}
	return c
}

func (h *batchHistogram) delete(label string) {
	h.mu.Lock()
	delete(h.children, label)
	h.mu.Unlock()
}

// ObserveBatch records n records that took d in all. It allocates nothing
// and takes no lock.
func (o *LatencyObserver) ObserveBatch(d time.Duration, n int) {
	if n <= 0 {
		return
	}
	per := int64(d) / int64(n)
	i := sort.Search(len(o.h.nanos), func(i int) bool { return o.h.nanos[i] >= per })
	o.counts[i].Add(uint64(n))
	o.sum.Add(uint64(max(d, 0)))
}

func (h *batchHistogram) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

// Collect reads each child's buckets; the count is their sum, so a scrape
// during an ObserveBatch sees a consistent histogram (the sum may be one
// batch ahead or behind).
func (h *batchHistogram) Collect(ch chan<- prometheus.Metric) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for label, c := range h.children {
		buckets := make(map[float64]uint64, len(h.bounds))
		var count uint64
		for i, b := range h.bounds {
			count += c.counts[i].Load()
			buckets[b] = count
		}
		count += c.counts[len(h.bounds)].Load()
		ch <- prometheus.MustNewConstHistogram(h.desc, count, float64(c.sum.Load())/1e9, buckets, label)
	}
}
