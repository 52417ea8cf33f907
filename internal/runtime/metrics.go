package runtime

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddy-streams/eddy/metrics"
)

// taskMetrics are a task's handles on the app's metrics (package metrics),
// resolved when the task opens, and what the task counts between two
// flushes. Only the task's worker goroutine touches it; the adds happen
// once per poll (flush), so the record path allocates nothing and takes
// no lock for metrics.
type taskMetrics struct {
	h *metrics.Task
	// lag[i] is source i's lag gauge and end[i] the partition's last
	// stable offset at its last fetch (-1 before the first).
	lag []prometheus.Gauge
	end []int64
	// counts are the processor's own counters, if it keeps them (package
	// eddy's count late, dead-lettered and time-refused records); late,
	// dlq and timeRefused their values at the last flush.
	counts                 processorCounts
	late, dlq, timeRefused int64
	// cache are the processor's table cache counts, if it keeps them;
	// forwarded and collapsed their values at the last flush.
	cache                tableCacheCounts
	forwarded, collapsed int64
	// produced counts Produce calls since the last flush.
	produced int64
	// removeDB stops reporting the database; it runs before the
	// database closes.
	removeDB func()
}

// processorCounts is implemented by task processors that count what only
// they see: records windowed operations dropped as late, records sent to
// a dead-letter topic, source records refused for their event time. The
// counts are since the task opened.
type processorCounts interface {
	LateDropped() int64
	DeadLetters() int64
	TimeRefused() int64
}

// tableCacheCounts is implemented by task processors with table caches
// (package eddy): updates forwarded and updates collapsed into a later
// one of their key, since the task opened.
type tableCacheCounts interface {
	TableCacheForwarded() int64
	TableCacheCollapsed() int64
}

// openMetrics resolves the task's metric children. closeMetrics releases
// them: every path that drops the task calls it.
func (t *task) openMetrics(m *metrics.Metrics) {
	t.m.h = m.Task(t.id.String())
	t.m.h.RestoreRemaining.Set(0)
	t.m.lag = make([]prometheus.Gauge, len(t.sources))
	t.m.end = make([]int64, len(t.sources))
	for i, tp := range t.sources {
		t.m.lag[i] = t.m.h.Lag(tp.Topic, tp.Partition)
		t.m.end[i] = -1
	}
}

// runMetrics starts reporting the database and reading the processor's
// counts, once the task is built.
func (t *task) runMetrics(m *metrics.Metrics) {
	t.m.counts, _ = t.proc.(processorCounts)
	t.m.cache, _ = t.proc.(tableCacheCounts)
	t.m.removeDB = m.AddDB(t.id.String(), t.db)
}

func (t *task) closeMetrics() {
	if t.m.removeDB != nil {
		t.m.removeDB() // waits for a scrape reading the database
		t.m.removeDB = nil
	}
	if t.m.h != nil {
		t.m.h.Close()
		t.m.h = nil
	}
}

// fetched notes source src's end offset from a fetch, and returns it: the
// last stable offset (the consumer reads committed records only), or the
// high watermark when the broker gives none.
func (t *task) fetched(src int, lastStable, highWatermark int64) int64 {
	if lastStable < 0 {
		lastStable = highWatermark
	}
	t.m.end[src] = lastStable
	return lastStable
}

// flushMetrics adds what the task counted since the last flush: n records
// processed in d (one poll's), records produced, the processor's counts,
// the waits for an input it ended by time, and the lag of its source
// partitions.
func (t *task) flushMetrics(d time.Duration, n int) {
	m := &t.m
	if n > 0 {
		m.h.Consumed.Add(float64(n))
		m.h.Latency.ObserveBatch(d, n)
	}
	if m.produced > 0 {
		m.h.Produced.Add(float64(m.produced))
		m.produced = 0
	}
	if m.counts != nil {
		if v := m.counts.LateDropped(); v > m.late {
			m.h.LateDropped.Add(float64(v - m.late))
			m.late = v
		}
		if v := m.counts.DeadLetters(); v > m.dlq {
			m.h.DeadLetters.Add(float64(v - m.dlq))
			m.dlq = v
		}
		if v := m.counts.TimeRefused(); v > m.timeRefused {
			m.h.TimeRefused.Add(float64(v - m.timeRefused))
			m.timeRefused = v
		}
	}
	if c := m.cache; c != nil {
		if v := c.TableCacheForwarded(); v > m.forwarded {
			m.h.CacheForwarded.Add(float64(v - m.forwarded))
			m.forwarded = v
		}
		if v := c.TableCacheCollapsed(); v > m.collapsed {
			m.h.CacheCollapsed.Add(float64(v - m.collapsed))
			m.collapsed = v
		}
	}
	if a := t.align; a != nil && a.forcedCount > 0 {
		m.h.IdleForced.Add(float64(a.forcedCount))
		t.status.idleForced.Add(a.forcedCount)
		a.forcedCount = 0
	}
	for i, end := range m.end {
		if end >= 0 {
			m.lag[i].Set(float64(max(end-t.next[i], 0)))
		}
	}
}
