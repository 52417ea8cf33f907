// Package metrics holds an eddy app's Prometheus metrics: a registry that
// the app owns (never the global one, so two apps in one process, or a
// test next to an app, do not collide), the families the runtime updates,
// and collectors that read the task databases (Pebble's own figures) when
// Prometheus scrapes.
//
// The record path pays nothing here: the runtime resolves each task's
// labelled children once, when the task opens (Metrics.Task), and adds to
// them once per poll, not per record; database figures are read at scrape
// time only. Every family is listed, with its type, labels and meaning, in
// docs/metrics.md (a test in dashboards checks the list against what is
// exported).
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are one app's metrics. Its methods are safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	consumed  *prometheus.CounterVec
	produced  *prometheus.CounterVec
	changelog *prometheus.CounterVec
	late      *prometheus.CounterVec
	dlq       *prometheus.CounterVec
	refused   *prometheus.CounterVec
	forced    *prometheus.CounterVec
	forwarded *prometheus.CounterVec
	collapsed *prometheus.CounterVec
	restore   *prometheus.GaugeVec
	lag       *prometheus.GaugeVec
	misplaced *prometheus.CounterVec
	latency   *batchHistogram

	commit    prometheus.Histogram
	committed prometheus.Counter
	aborted   prometheus.Counter
	dbs       *dbCollector
	tasksMu   sync.Mutex
	tasks     map[string]*Task
}

// Label names.
const (
	LabelTask      = "task"
	LabelTopic     = "topic"
	LabelPartition = "partition"
	LabelResult    = "result"
)

// latencyBuckets are the bounds of eddy_process_latency_seconds: 100ns to
// about 0.2s, doubling. A record takes a few microseconds when all is well.
var latencyBuckets = prometheus.ExponentialBuckets(100e-9, 2, 22)

// commitBuckets are the bounds of eddy_commit_duration_seconds: 1ms to
// about 16s, doubling; a commit takes tens of milliseconds when all is well,
// and a transaction times out after 10s by default.
var commitBuckets = prometheus.ExponentialBuckets(1e-3, 2, 15)

// New returns the metrics of one app, registered in a new registry along
// with the Go runtime's and the process's collectors.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	task := []string{LabelTask}
	m := &Metrics{
		reg: reg,
		consumed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_records_consumed_total",
			Help: "Source records run through the topology, per task. Records of an aborted transaction are counted again when they are reprocessed.",
		}, task),
		produced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_records_produced_total",
			Help: "Records the topology produced (sinks, repartition and dead-letter topics; not changelogs), per task, counted when produced in the open transaction.",
		}, task),
		changelog: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_changelog_records_produced_total",
			Help: "Changelog records produced (one per dirty key and store per transaction, plus one offsets record per store), per task.",
		}, task),
		late: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_late_records_dropped_total",
			Help: "Records that windowed operations (window aggregations, stream-stream joins) dropped as late: their window closed (end + grace before stream time), per task.",
		}, task),
		dlq: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_dlq_records_total",
			Help: "Source records sent to the dead-letter topic <topic>.dlq (failed to decode, refused for their event time, failed to process, or to produce their outputs; whole or truncated), per task.",
		}, task),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_time_refused_records_total",
			Help: "Source records refused for their event time (stage time: negative, after 2262, or more than Config.MaxEventTimeAhead ahead of the wall clock) and dead-lettered or skipped as Config.OnDecodeError says, per task. Dead-lettered ones count in eddy_dlq_records_total too.",
		}, task),
		forced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_task_idle_forced_total",
			Help: "Times a task with several source partitions stopped waiting for an empty one (MaxTaskIdle passed, or one with records on the broker delivered none for a long while) and processed its other partitions' records without it, so possibly out of timestamp order, per task.",
		}, task),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_table_cache_forwarded_total",
			Help: "Table updates the table cache (Config.TableCacheBytes) forwarded downstream: at a commit, before a punctuation, or evicted when the cache was full, per task. Updates of aborted transactions count too. Zero when the cache is off.",
		}, task),
		collapsed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_table_cache_collapsed_total",
			Help: "Table updates the table cache replaced with a later update of the same key before forwarding them, so downstream never saw them, per task.",
		}, task),
		restore: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eddy_restore_remaining_records",
			Help: "Changelog offsets a task still has to replay before it runs (0 once restored), per task that is open or opening.",
		}, task),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eddy_consumer_lag_records",
			Help: "Per source partition of an open task: the partition's last stable offset (high watermark when the broker gives none) at the last fetch, minus the next offset to process. Updated when a poll brings records; a transactional input may show 1 at rest (the commit marker).",
		}, []string{LabelTopic, LabelPartition}),
		misplaced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_misplaced_records_total",
			Help: "Records of co-partitioned sources (joins, merged sources) whose key hashes, under the app's partitioner (Config.Partitioner), to another partition than the one they were read from: they miss the records of their key in the other sources. Per partition read from; counts the records checked (Config.PartitionCheckEvery).",
		}, []string{LabelTopic, LabelPartition}),
		latency: newBatchHistogram(
			"eddy_process_latency_seconds",
			"Time to run one source record through the topology, per task. Measured per poll, not per record (two clock reads and an observation per record would cost 130-280ns, a share of a core at hundreds of thousands of records/s): each record of a task's poll counts once, at the mean time of that poll's records.",
			LabelTask, latencyBuckets),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "eddy_commit_duration_seconds",
			Help:    "Time a worker's commit takes: changelog records produced and flushed, the transaction ended (commit or abort), the committed state applied to the task databases.",
			Buckets: commitBuckets,
		}),
		tasks: make(map[string]*Task),
	}
	tx := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "eddy_transactions_total",
		Help: "Transactions ended, by result: committed or aborted (a rebalance, a fenced producer, an error). At least once, a commit period that committed its offsets.",
	}, []string{LabelResult})
	m.committed = tx.WithLabelValues("committed")
	m.aborted = tx.WithLabelValues("aborted")
	m.dbs = newDBCollector()
	reg.MustRegister(m.consumed, m.produced, m.changelog, m.late, m.dlq, m.refused, m.forced, m.forwarded, m.collapsed, m.restore, m.lag,
		m.misplaced, m.latency, m.commit, tx, m.dbs,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is the app's registry: register your own collectors there and
// they are served on /metrics with eddy's.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in Prometheus' exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// ObserveCommit records one ended transaction: how long its commit took and
// whether it committed.
func (m *Metrics) ObserveCommit(d time.Duration, committed bool) {
	m.commit.Observe(d.Seconds())
	if committed {
		m.committed.Inc()
	} else {
		m.aborted.Inc()
	}
}

// ObserveAbort records a transaction aborted outside a commit (a rebalance,
// an error while processing).
func (m *Metrics) ObserveAbort() { m.aborted.Inc() }

// Misplaced returns the counter of misplaced records read from a source
// partition. The series stays once created: a misplaced record is a fact
// about the topic, not about the task that read it.
func (m *Metrics) Misplaced(topic string, partition int32) prometheus.Counter {
	return m.misplaced.WithLabelValues(topic, strconv.Itoa(int(partition)))
}

// Task is one task's pre-resolved children of the per-task families. The
// runtime adds to them from the task's worker goroutine; adding allocates
// nothing and takes no lock.
type Task struct {
	m    *Metrics
	id   string
	refs int // guarded by m.tasksMu
	// lag are the lag gauges of the task's source partitions, resolved
	// by Lag and deleted with the task.
	lag []lagChild

	Consumed         prometheus.Counter
	Produced         prometheus.Counter
	Changelog        prometheus.Counter
	LateDropped      prometheus.Counter
	DeadLetters      prometheus.Counter
	TimeRefused      prometheus.Counter
	IdleForced       prometheus.Counter
	CacheForwarded   prometheus.Counter
	CacheCollapsed   prometheus.Counter
	RestoreRemaining prometheus.Gauge
	Latency          *LatencyObserver
}

type lagChild struct {
	topic, partition string
	g                prometheus.Gauge
}

// Task returns the children of task id, creating them at the first call.
// Each call must be matched by a Close: a task that moves between two
// workers of one process can be open twice for a moment, and its series
// live until both closed.
func (m *Metrics) Task(id string) *Task {
	m.tasksMu.Lock()
	defer m.tasksMu.Unlock()
	if t := m.tasks[id]; t != nil {
		t.refs++
		return t
	}
	t := &Task{
		m: m, id: id, refs: 1,
		Consumed:         m.consumed.WithLabelValues(id),
		Produced:         m.produced.WithLabelValues(id),
		Changelog:        m.changelog.WithLabelValues(id),
		LateDropped:      m.late.WithLabelValues(id),
		DeadLetters:      m.dlq.WithLabelValues(id),
		TimeRefused:      m.refused.WithLabelValues(id),
		IdleForced:       m.forced.WithLabelValues(id),
		CacheForwarded:   m.forwarded.WithLabelValues(id),
		CacheCollapsed:   m.collapsed.WithLabelValues(id),
		RestoreRemaining: m.restore.WithLabelValues(id),
		Latency:          m.latency.child(id),
	}
	m.tasks[id] = t
	return t
}

// Lag returns the lag gauge of a source partition of the task.
func (t *Task) Lag(topic string, partition int32) prometheus.Gauge {
	p := strconv.Itoa(int(partition))
	t.m.tasksMu.Lock()
	defer t.m.tasksMu.Unlock()
	for _, l := range t.lag {
		if l.topic == topic && l.partition == p {
			return l.g
		}
	}
	g := t.m.lag.WithLabelValues(topic, p)
	t.lag = append(t.lag, lagChild{topic, p, g})
	return g
}

// Close releases the task's series once every Task call for it is closed:
// a task that moved away is no longer reported by this instance.
func (t *Task) Close() {
	m := t.m
	m.tasksMu.Lock()
	defer m.tasksMu.Unlock()
	t.refs--
	if t.refs > 0 || m.tasks[t.id] != t {
		return
	}
	delete(m.tasks, t.id)
	for _, v := range []*prometheus.CounterVec{m.consumed, m.produced, m.changelog, m.late, m.dlq, m.refused, m.forced, m.forwarded, m.collapsed} {
		v.DeleteLabelValues(t.id)
	}
	m.restore.DeleteLabelValues(t.id)
	m.latency.delete(t.id)
	for _, l := range t.lag {
		m.lag.DeleteLabelValues(l.topic, l.partition)
	}
}
