package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/eddy-streams/eddy/internal/plan"
	eddyruntime "github.com/eddy-streams/eddy/internal/runtime"
	"github.com/eddy-streams/eddy/state"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/harness/local"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/nexmark/queries"
	"github.com/eddy-streams/eddy/state/pebble"
)

// NexmarkOptions configure one Nexmark query run.
type NexmarkOptions struct {
	Query  queries.Query
	Events int64
	Seed   uint64
	// EventRate is the generator's event-time rate in events per second
	// (zero: the model's 10,000). It does not throttle anything; a higher
	// rate packs more events into each window, and so more state.
	EventRate float64
	// CommitInterval is the generator source's commit interval (default
	// 1 s, as the issue and Flink's checkpoint interval in the suite).
	CommitInterval time.Duration
	// Workers is the generator source's parallelism (0 or 1: one, on the
	// caller's goroutine): the topology runs over as many partitions, a
	// worker goroutine each, the generator's work split among them (see
	// internal/harness/local).
	Workers int
	// Dir holds the state; empty means a temporary directory, removed
	// after the run.
	Dir string
	// StateMemory is split as an App splits Config.StateMemory: half for
	// the write buffers' caches, half for Pebble's cache (zero: eddy's
	// default, DefaultStateMemory). CacheSize and MemTableSize, when set,
	// size Pebble instead.
	StateMemory  int64
	CacheSize    int64
	MemTableSize uint64
	// TableCacheBytes is Config.TableCacheBytes (0: eddy's default,
	// 10 MiB; negative: off).
	TableCacheBytes int64
	// Results, when set, is a directory the query's result rows are
	// written to (<query>.jsonl; see resultWriter). Writing an append-only
	// result's rows is part of the run, so measure without it.
	Results string
	// Progress receives a progress bar, redrawn at each commit.
	Progress   io.Writer
	CPUProfile string
}

// stateMemory splits the state memory as App.Run does: the write buffers'
// budget and the Pebble backend's options.
func (opts NexmarkOptions) stateMemory() (*state.CacheBudget, pebble.Options) {
	mem := opts.StateMemory
	if mem == 0 {
		mem = eddy.DefaultStateMemory()
	}
	po := pebble.Options{CacheSize: opts.CacheSize, MemTableSize: opts.MemTableSize}
	if po.CacheSize == 0 {
		po.CacheSize = mem - mem/2
	}
	return state.NewCacheBudget(mem / 2), po
}

// NexmarkResult is the JSON line `eddy bench nexmark` prints per query.
type NexmarkResult struct {
	Query  string `json:"query"`
	Source string `json:"source"`
	Events int64  `json:"events"`
	// Workers is the generator source's parallelism.
	Workers int `json:"workers,omitempty"`
	// Seconds and CPUSeconds cover the run from the first event to the
	// last commit, not the verification after it. CPU is the whole
	// process's user + system time: generator, engine, Pebble's
	// background work, the garbage collector and, with the generator
	// source, the sink (which hashes each output record into the check's
	// digest: tens of nanoseconds a record).
	Seconds            float64 `json:"seconds"`
	CPUSeconds         float64 `json:"cpu_seconds"`
	EventsPerSecond    float64 `json:"events_per_second"`
	EventsPerCPUSecond float64 `json:"events_per_cpu_second"`
	// PeakRSSBytes is the process's peak resident set (VmHWM) over the
	// run (reset when it starts).
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// StateBytes is the size of the state directory on disk after the
	// last commit.
	StateBytes int64 `json:"state_bytes"`
	// BrokerCPUSeconds is the broker process's CPU time over the run
	// (Kafka source only; not in CPUSeconds).
	BrokerCPUSeconds float64 `json:"broker_cpu_seconds,omitempty"`
	Outputs          int64   `json:"outputs"`
	Commits          int     `json:"commits,omitempty"`
	Verified         bool    `json:"verified"`
	// VerifyError says how the output differed from the reference.
	VerifyError string `json:"verify_error,omitempty"`
	// CPUShare says where the CPU went, from the run's CPU profile when
	// one was taken (see CPUShares).
	CPUShare map[string]float64 `json:"cpu_share,omitempty"`
}

// nexmarkOutput is the topic every query writes its result to with the
// generator source (over Kafka, each query has its own: nexmark-<query>-out).
const nexmarkOutput = "nexmark-out"

// Nexmark runs one query over events [0, opts.Events) of the generator,
// in-process (internal/harness/local): state in Pebble, a commit every
// CommitInterval, the result counted and checked by the query's Check.
func Nexmark(ctx context.Context, opts NexmarkOptions) (NexmarkResult, error) {
	q := opts.Query
	workers := max(opts.Workers, 1)
	res := NexmarkResult{Query: q.Name, Events: opts.Events, Source: "generator", Workers: workers}
	g, err := nexmark.New(nexmark.Config{Seed: opts.Seed, EventsPerSecond: opts.EventRate})
	if err != nil {
		return res, err
	}
	dir, cleanup, err := runDir(opts.Dir, q.Name)
	if err != nil {
		return res, err
	}
	defer cleanup()
	topo := eddy.NewTopology()
	topics := nexmark.DefaultTopics()
	topics.Partitions = workers // a partition per worker
	out := nexmarkOutput
	if q.Files != nil {
		// The query writes files: into the run's directory, read back
		// and checked after the run.
		out = filepath.Join(dir, "output")
	}
	q.Build(topo, topics, out)
	rt, err := plan.Build(topo, eddy.Config{AppID: "nexmark-" + q.Name})
	if err != nil {
		return res, fmt.Errorf("bench: nexmark %s: %w", q.Name, err)
	}
	check := q.NewCheck(g, opts.Events)
	var results *resultWriter
	if opts.Results != "" {
		if results, err = newResultWriter(opts.Results, q); err != nil {
			return res, err
		}
	}
	var other int64
	sink := func(topic string, key, value []byte, ts int64) {
		if topic != nexmarkOutput {
			other++
			return
		}
		res.Outputs++
		check.Add(key, value, ts)
		if results != nil {
			results.add(key, value)
		}
	}
	sources := make([]local.Source, workers)
	for w := range sources {
		sources[w] = g.Source(topics)
	}
	caches, pebbleOpts := opts.stateMemory()
	backend := pebble.New(pebbleOpts)
	defer backend.Close()
	runner, err := local.New(rt, sources, local.Config{Backend: backend, Dir: dir, CommitInterval: opts.CommitInterval, StateCache: caches, TableCacheBytes: cmp.Or(opts.TableCacheBytes, eddy.DefaultTableCacheBytes), Sink: sink,
		Globals: nexmarkGlobals(rt, topics)})
	if err != nil {
		return res, err
	}
	defer runner.Close()
	bar := progressBar{w: opts.Progress, name: q.Name, total: opts.Events}
	stopProfile, err := startCPUProfile(opts.CPUProfile)
	if err != nil {
		return res, err
	}
	defer stopProfile()
	runtime.GC()
	resetPeakRSS()
	cpu0, start := cpuSeconds(), time.Now()
	bar.start = start
	if err := runner.Run(ctx, opts.Events, bar.draw); err != nil {
		return res, fmt.Errorf("bench: nexmark %s: %w", q.Name, err)
	}
	// The generator's events are bounded: their end closes every window,
	// as the suite's bounded runs end with Flink's end-of-input watermark.
	if err := runner.EndOfInput(eddy.EndOfInputTime); err != nil {
		return res, fmt.Errorf("bench: nexmark %s: %w", q.Name, err)
	}
	res.Seconds = time.Since(start).Seconds()
	res.CPUSeconds = cpuSeconds() - cpu0
	stopProfile()
	bar.done()
	res.EventsPerSecond = float64(opts.Events) / res.Seconds
	res.EventsPerCPUSecond = float64(opts.Events) / res.CPUSeconds
	res.PeakRSSBytes = peakRSS()
	res.Commits = runner.Commits
	res.StateBytes = dirBytes(dir)
	if q.Files != nil {
		res.StateBytes -= dirBytes(out)
		err := q.Files(out, func(key, value []byte) {
			res.Outputs++
			check.Add(key, value, 0)
			if results != nil {
				results.add(key, value)
			}
		})
		if err != nil {
			res.VerifyError = err.Error()
			return res, nil
		}
	}
	if results != nil {
		if err := results.close(); err != nil {
			return res, err
		}
	}
	if other > 0 {
		res.VerifyError = fmt.Sprintf("%d records written to topics other than the result (dead letters?)", other)
		return res, nil
	}
	if err := check.Verify(); err != nil {
		res.VerifyError = err.Error()
		return res, nil
	}
	res.Verified = true
	return res, nil
}

// nexmarkGlobals are the contents of the global tables' topics a query
// reads: the side input (q13), loaded before the run as the suite loads its
// file. A global table of another topic gets none, and the runner says so.
func nexmarkGlobals(rt eddyruntime.Topology, topics nexmark.Topics) map[string][]local.Record {
	globals := map[string][]local.Record{}
	for _, g := range rt.Globals {
		if g.Topic != topics.SideInput {
			continue
		}
		rows := nexmark.SideInput()
		recs := make([]local.Record, len(rows))
		for i, r := range rows {
			recs[i].Key, recs[i].Value = r.Encode()
		}
		globals[g.Topic] = recs
	}
	return globals
}

// NexmarkGenerator measures the ceiling: the generator alone, producing
// every event's record as the in-process source does for a query that
// reads every topic, with nothing downstream.
func NexmarkGenerator(opts NexmarkOptions) (NexmarkResult, error) {
	res := NexmarkResult{Query: "generator", Source: "generator", Events: opts.Events}
	g, err := nexmark.New(nexmark.Config{Seed: opts.Seed, EventsPerSecond: opts.EventRate})
	if err != nil {
		return res, err
	}
	src := g.Source(nexmark.DefaultTopics())
	var rec kgo.Record
	var bytes int64
	runtime.GC()
	cpu0, start := cpuSeconds(), time.Now()
	for i := range opts.Events {
		if src.Read(i, &rec) {
			bytes += int64(len(rec.Value))
		}
	}
	res.Seconds = time.Since(start).Seconds()
	res.CPUSeconds = cpuSeconds() - cpu0
	res.EventsPerSecond = float64(opts.Events) / res.Seconds
	res.EventsPerCPUSecond = float64(opts.Events) / res.CPUSeconds
	res.PeakRSSBytes = peakRSS()
	res.Outputs = opts.Events
	if bytes == 0 {
		return res, fmt.Errorf("bench: the generator produced no bytes")
	}
	return res, nil
}

// runDir returns the directory of one query's run: a new temporary one
// (removed by cleanup) when parent is empty, else parent/query, which must
// not hold anything yet: a run resumed from an earlier one's state would
// process nothing and report a rate of nothing.
func runDir(parent, query string) (dir string, cleanup func(), err error) {
	if parent == "" {
		dir, err := os.MkdirTemp("", "eddy-nexmark-")
		if err != nil {
			return "", nil, err
		}
		return dir, func() { os.RemoveAll(dir) }, nil
	}
	dir = filepath.Join(parent, query)
	entries, err := os.ReadDir(dir)
	if err == nil && len(entries) > 0 {
		return "", nil, fmt.Errorf("bench: --state-dir: %s is not empty; a run starts from nothing: remove it or pick another directory", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	return dir, func() {}, nil
}

// resetPeakRSS starts a new peak of the resident set (Linux: writing 5 to
// /proc/self/clear_refs), so that the peak reported is the run's, not the
// setup's; where it cannot, the peak includes the setup.
func resetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// startCPUProfile starts a CPU profile into path (none if path is empty)
// and returns what stops it; calling the stop twice is harmless.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	stopped := false
	return func() {
		if !stopped {
			stopped = true
			pprof.StopCPUProfile()
			f.Close()
		}
	}, nil
}

// progressBar draws "q3 [#####.....]  45% 900000/2000000 events  812K events/s"
// on one line, redrawn in place.
type progressBar struct {
	w     io.Writer
	name  string
	total int64
	start time.Time
	// last and drawn are the count and time of the last drawing: it is
	// redrawn on change, at most five times a second.
	last  int64
	drawn time.Time
}

func (b *progressBar) draw(done int64) {
	if b.w == nil || b.total == 0 {
		return
	}
	unchanged := done == b.last && done != 0
	tooSoon := time.Since(b.drawn) < 200*time.Millisecond && done < b.total
	if unchanged || tooSoon {
		return
	}
	b.last, b.drawn = done, time.Now()
	const width = 30
	filled := int(done * width / b.total)
	rate := float64(done) / time.Since(b.start).Seconds()
	fmt.Fprintf(b.w, "\r%-4s [%s%s] %3d%% %d/%d events  %.0fK events/s ",
		b.name, bytes.Repeat([]byte{'#'}, filled), bytes.Repeat([]byte{'.'}, width-filled),
		done*100/b.total, done, b.total, rate/1000)
}

func (b *progressBar) done() {
	if b.w != nil {
		fmt.Fprintln(b.w)
	}
}

// peakRSS reads the process's peak resident set size (VmHWM) from
// /proc/self/status, or 0 where there is none.
func peakRSS() int64 {
	_, hwm := procMemory(os.Getpid())
	return hwm
}
