package metrics

import (
	"math"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddy-streams/eddy/state"
)

// lsmDB is what the collector needs of a task database to export its
// LSM figures: state/pebble's databases have it. Other backends (the
// in-memory one, RocksDB) need not; their tasks then have no eddy_pebble_*
// or eddy_state_bytes series. The figures are state's type, so this
// package depends on no backend.
type lsmDB interface {
	Metrics() state.DBMetrics
}

// blockCache is what the collector needs of a backend to export its
// shared block cache: state/pebble's Backend has it.
type blockCache interface {
	CacheMetrics() state.CacheMetrics
}

// dbCollector reads the open task databases when Prometheus scrapes, so
// that nothing on the record path pays for these figures. Its mutex keeps
// a database from closing while a scrape reads it: the runtime removes a
// database (RemoveDB waits for a scrape in progress) before closing it.
type dbCollector struct {
	mu      sync.Mutex
	dbs     map[*dbEntry]struct{}
	backend blockCache
	caches  *state.CacheBudget

	stateBytes, writeAmp, flushes, compactions, compactionsRunning, compactionDebt,
	stalls, stallSeconds, l0Files, l0Sublevels, readAmp, memtableBytes, memtables *prometheus.Desc
	cacheBytes, cacheHits, cacheMisses, cacheHitRatio                *prometheus.Desc
	memLimit, memUsed, bufHits, bufMisses, bufEvictions, bufHitRatio *prometheus.Desc
}

type dbEntry struct {
	task string
	db   lsmDB
}

func newDBCollector() *dbCollector {
	task := []string{LabelTask}
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, task, nil) }
	g := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	part := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, []string{"part"}, nil) }
	return &dbCollector{
		dbs:                make(map[*dbEntry]struct{}),
		stateBytes:         d("eddy_state_bytes", "Disk space of a running task's database (all its stores, offsets, write-ahead log and files awaiting deletion), per task. Pebble backend only."),
		writeAmp:           d("eddy_pebble_write_amplification", "Pebble write amplification since the task's database opened: bytes written by flushes and compactions per byte written to its log."),
		flushes:            d("eddy_pebble_flushes_total", "Memtable flushes completed since the task's database opened."),
		compactions:        d("eddy_pebble_compactions_total", "Compactions completed since the task's database opened."),
		compactionsRunning: d("eddy_pebble_compactions_in_progress", "Compactions running now in the task's database."),
		compactionDebt:     d("eddy_pebble_compaction_pending_bytes", "Pebble's estimate of the bytes compactions must rewrite to bring the task's LSM back into shape (compaction debt)."),
		stalls:             d("eddy_pebble_write_stalls_total", "Times Pebble held the task's writes back (too many memtables or level-0 files) since its database opened."),
		stallSeconds:       d("eddy_pebble_write_stall_seconds_total", "Time the task's writes were held back by write stalls, a stall in progress included."),
		l0Files:            d("eddy_pebble_l0_files", "Tables in level 0 of the task's database: many mean compactions fall behind and reads slow down."),
		l0Sublevels:        d("eddy_pebble_l0_sublevels", "Sublevels of level 0 of the task's database (its read amplification)."),
		readAmp:            d("eddy_pebble_read_amplification", "Read amplification of the task's database: the tables a point read may consult."),
		memtableBytes:      d("eddy_pebble_memtable_bytes", "Memory held by the task database's memtables: those queued for flush, and a flushed one kept for reuse, included."),
		memtables:          d("eddy_pebble_memtables", "Memtables of the task's database, those queued for flush included."),
		cacheBytes:         g("eddy_pebble_block_cache_bytes", "Bytes held by the block cache that every task database of the process shares."),
		cacheHits:          g("eddy_pebble_block_cache_hits_total", "Block cache lookups that hit, all task databases together."),
		cacheMisses:        g("eddy_pebble_block_cache_misses_total", "Block cache lookups that missed, all task databases together."),
		cacheHitRatio:      g("eddy_pebble_block_cache_hit_ratio", "Share of block cache lookups that hit since the process started (hits / (hits + misses)); NaN before the first lookup (reads served by memtables do not look the cache up)."),
		memLimit:           part("eddy_state_memory_limit_bytes", "The state memory budget (Config.StateMemory) by part: write_buffers (the write buffers' cache of committed values) and block_cache (the Pebble backend's block cache, which also holds its memtables)."),
		memUsed:            part("eddy_state_memory_used_bytes", "State memory in use by part: write_buffers, block_cache (blocks) and memtables (all task databases; Pebble charges them to the block cache)."),
		bufHits:            g("eddy_state_cache_hits_total", "Store reads that the write buffers' cache of committed values answered (a cached miss included), all tasks together."),
		bufMisses:          g("eddy_state_cache_misses_total", "Store reads that went to the task database, all tasks together."),
		bufEvictions:       g("eddy_state_cache_evictions_total", "Keys the write buffers' cache evicted to stay within its part of the state memory budget."),
		bufHitRatio:        g("eddy_state_cache_hit_ratio", "Share of store reads that the write buffers' cache answered since the app started; NaN before the first read."),
	}
}

// AddDB reports db, a running task's database, under the task's label
// until remove is called; call remove before closing the database. A
// database that is not Pebble's is not reported, and remove is then a
// no-op.
func (m *Metrics) AddDB(task string, db any) (remove func()) {
	p, ok := db.(lsmDB)
	if !ok {
		return func() {}
	}
	c := m.dbs
	e := &dbEntry{task: task, db: p}
	c.mu.Lock()
	c.dbs[e] = struct{}{}
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			delete(c.dbs, e)
			c.mu.Unlock()
		})
	}
}

// SetStateCache makes the write buffers' cache budget reported; nil stops
// reporting it.
func (m *Metrics) SetStateCache(b *state.CacheBudget) {
	c := m.dbs
	c.mu.Lock()
	c.caches = b
	c.mu.Unlock()
}

// SetBackend makes the block cache of backend reported, if it has one
// (state/pebble's Backend). A nil backend stops reporting it.
func (m *Metrics) SetBackend(backend any) {
	c := m.dbs
	p, _ := backend.(blockCache)
	c.mu.Lock()
	c.backend = p
	c.mu.Unlock()
}

func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.stateBytes, c.writeAmp, c.flushes, c.compactions, c.compactionsRunning,
		c.compactionDebt, c.stalls, c.stallSeconds, c.l0Files, c.l0Sublevels, c.readAmp, c.memtableBytes, c.memtables,
		c.cacheBytes, c.cacheHits, c.cacheMisses, c.cacheHitRatio,
		c.memLimit, c.memUsed, c.bufHits, c.bufMisses, c.bufEvictions, c.bufHitRatio} {
		ch <- d
	}
}

func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := make(map[string]bool, len(c.dbs))
	var memtables uint64
	for e := range c.dbs {
		// A task moving between two workers of the process can be open
		// twice for a moment; a series must appear once per scrape.
		if seen[e.task] {
			continue
		}
		seen[e.task] = true
		s := e.db.Metrics()
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, e.task)
		}
		counter := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, e.task)
		}
		gauge(c.stateBytes, float64(s.DiskBytes))
		gauge(c.writeAmp, s.WriteAmp)
		counter(c.flushes, float64(s.Flushes))
		counter(c.compactions, float64(s.Compactions))
		gauge(c.compactionsRunning, float64(s.CompactionsInProgress))
		gauge(c.compactionDebt, float64(s.CompactionPendingBytes))
		counter(c.stalls, float64(s.WriteStalls))
		counter(c.stallSeconds, s.WriteStallDuration.Seconds())
		gauge(c.l0Files, float64(s.L0Files))
		gauge(c.l0Sublevels, float64(s.L0Sublevels))
		gauge(c.readAmp, float64(s.ReadAmp))
		gauge(c.memtableBytes, float64(s.MemTableBytes))
		memtables += s.MemTableBytes
		gauge(c.memtables, float64(s.MemTables))
	}
	part := func(d *prometheus.Desc, name string, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), name)
	}
	if b := c.caches; b != nil {
		st := b.Stats()
		part(c.memLimit, "write_buffers", st.Limit)
		part(c.memUsed, "write_buffers", st.Used)
		ch <- prometheus.MustNewConstMetric(c.bufHits, prometheus.CounterValue, float64(st.Hits))
		ch <- prometheus.MustNewConstMetric(c.bufMisses, prometheus.CounterValue, float64(st.Misses))
		ch <- prometheus.MustNewConstMetric(c.bufEvictions, prometheus.CounterValue, float64(st.Evictions))
		ch <- prometheus.MustNewConstMetric(c.bufHitRatio, prometheus.GaugeValue, ratio(st.Hits, st.Misses))
	}
	if len(c.dbs) > 0 {
		part(c.memUsed, "memtables", int64(memtables))
	}
	if c.backend == nil {
		return
	}
	cm := c.backend.CacheMetrics()
	part(c.memLimit, "block_cache", cm.Capacity)
	part(c.memUsed, "block_cache", cm.Bytes)
	ch <- prometheus.MustNewConstMetric(c.cacheBytes, prometheus.GaugeValue, float64(cm.Bytes))
	ch <- prometheus.MustNewConstMetric(c.cacheHits, prometheus.CounterValue, float64(cm.Hits))
	ch <- prometheus.MustNewConstMetric(c.cacheMisses, prometheus.CounterValue, float64(cm.Misses))
	ch <- prometheus.MustNewConstMetric(c.cacheHitRatio, prometheus.GaugeValue, ratio(cm.Hits, cm.Misses))
}

// ratio is hits / (hits + misses), NaN before the first lookup.
func ratio(hits, misses int64) float64 {
	if n := hits + misses; n > 0 {
		return float64(hits) / float64(n)
	}
	return math.NaN()
}
