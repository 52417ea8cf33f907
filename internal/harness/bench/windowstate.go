package bench

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	windowed "github.com/eddy-streams/eddy/examples/windowed/pipeline"
	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/pebble"
)

// WindowStateOptions configure the window-store size measurement.
type WindowStateOptions struct {
	Records, Accounts, Partitions int
	// Window and Grace are the example's; the store keeps a window for
	// its retention, Window + Grace, of stream time.
	Window, Grace time.Duration
	// Retentions is how many retentions of event time the input spans.
	Retentions int
	// MemTableSize is each task database's Pebble memtable size (0:
	// eddy's default). A small one makes the run span many flushes and
	// compactions, so the on-disk figure shows what they leave.
	MemTableSize uint64
	Out          io.Writer
}

// StateSample is the window store, summed over the tasks, when every task's
// stream time first reached Retentions retentions after the first payment.
type StateSample struct {
	Retentions int   `json:"retentions"`
	Processed  int64 `json:"payments_processed"`
	// Keys are the live window entries (account and window) in the store;
	// Windows the distinct window starts among them.
	Keys    int `json:"live_keys"`
	Windows int `json:"live_windows"`
	// DiskBytes are the files of the task databases, as the file system
	// reports them: TableBytes in sstables, WALBytes in write-ahead logs,
	// the rest manifests and options.
	DiskBytes  int64 `json:"disk_bytes"`
	TableBytes int64 `json:"table_bytes"`
	WALBytes   int64 `json:"wal_bytes"`
	Tables     int   `json:"tables"`
}

// WindowStateResult is a measurement: the samples, and what the input held.
type WindowStateResult struct {
	Samples []StateSample
	// InputWindows are the distinct (account, window) pairs of the input:
	// what the store would hold at the end if nothing expired.
	InputWindows int
	Retention    time.Duration
	Seconds      float64
}

// WindowState runs examples/windowed exactly once over input whose event
// time spans opts.Retentions retentions, and samples its store once per
// retention of stream time: live keys and on-disk bytes, from inside the
// state backend right after a committed batch was applied (the runtime's
// goroutine, so the database is not read concurrently). A store that
// expires its windows stays flat while the processed payments grow.
func WindowState(ctx context.Context, opts WindowStateOptions) (WindowStateResult, error) {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	w, g := opts.Window.Milliseconds(), opts.Grace.Milliseconds()
	retention := w + g
	span := retention * int64(opts.Retentions)
	step := float64(span) / float64(opts.Records)
	res := WindowStateResult{Retention: time.Duration(retention) * time.Millisecond}
	fmt.Fprintf(out, "%d payments over %d accounts in %d partitions; %v windows, grace %v (retention %v); %d retentions (%.1f s) of event time\n",
		opts.Records, opts.Accounts, opts.Partitions, opts.Window, opts.Grace, res.Retention, opts.Retentions, float64(span)/1000)

	inputWindows := map[string]bool{}
	pb := pebble.New(pebble.Options{MemTableSize: opts.MemTableSize})
	defer pb.Close()
	backend := &sampling{inner: pb, store: windowed.StoreName, start: eventTimeBase, every: retention, samples: map[string]map[int]StateSample{}}
	wl := workload{
		produce: func(ctx context.Context, cl *kgo.Client) error {
			return producePayments(ctx, cl, opts.Records, opts.Accounts, eventTimes(step, w, g, func(account string, ts int64) {
				inputWindows[fmt.Sprintf("%s@%d", account, ts-ts%w)] = true
			}))
		},
		topology: func(output string) *eddy.Topology {
			return windowed.Topology(windowed.Options{Input: inputTopic, Output: output, Window: opts.Window, Grace: opts.Grace})
		},
		backend: backend,
	}
	// Transactions are capped at a tenth of a retention's payments, so
	// that a committed batch, where the samples are taken, moves stream
	// time by about a tenth of a retention per task and no task skips a
	// sample (at full speed a 100 ms transaction spans several).
	lo := LedgerOptions{Records: opts.Records, Partitions: opts.Partitions, Accounts: opts.Accounts,
		CommitRecords: max(1, opts.Records/opts.Retentions/10)}
	r, err := withLoadedBroker(ctx, lo, wl, func(seeds []string) (Result, error) {
		return runApp(ctx, seeds, eddy.ExactlyOnce, wl, lo, 1, "")
	})
	if err != nil {
		return res, err
	}
	res.Seconds = r.Seconds
	res.InputWindows = len(inputWindows)
	res.Samples, err = backend.merge()
	return res, err
}

// sampling is a state.Backend that measures each task's store after the
// batches that carry its stream time across a sample boundary.
type sampling struct {
	inner state.Backend
	store string
	// Samples are taken when stream time reaches start + k·every.
	start, every int64

	mu      sync.Mutex
	samples map[string]map[int]StateSample // by task directory, then k
	err     error
}

func (s *sampling) Open(dir string) (state.DB, error) {
	db, err := s.inner.Open(dir)
	if err != nil {
		return nil, err
	}
	return &sampledDB{DB: db, s: s, dir: dir}, nil
}

func (s *sampling) Destroy(dir string) error { return s.inner.Destroy(dir) }

type sampledDB struct {
	state.DB
	s    *sampling
	dir  string
	next int // the next sample's k
}

func (d *sampledDB) Apply(b *state.Batch) error {
	if err := d.DB.Apply(b); err != nil {
		return err
	}
	st := b.Offsets.StreamTime
	if st == state.NoStreamTime || st < d.s.start+int64(d.next)*d.s.every {
		return nil
	}
	// A batch that crosses several boundaries is one sample, of the last.
	k := int((st - d.s.start) / d.s.every)
	d.next = k + 1
	sample, err := d.measure(k, b.Offsets)
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	if err != nil {
		d.s.err = err
		return nil // a failed measurement fails the report, not the app
	}
	if d.s.samples[d.dir] == nil {
		d.s.samples[d.dir] = map[int]StateSample{}
	}
	d.s.samples[d.dir][k] = sample
	return nil
}

func (d *sampledDB) measure(k int, offs state.Offsets) (StateSample, error) {
	sample := StateSample{Retentions: k}
	for _, o := range offs.Input {
		sample.Processed += o
	}
	starts := map[string]bool{}
	err := d.DB.Scan(d.s.store, nil, nil, func(key, _ []byte) error {
		// Window entries are keyed by the 8-byte window start, then the
		// account; the store's own metadata keys start with 0xff.
		if len(key) > 8 && key[0] != 0xff {
			sample.Keys++
			starts[string(key[:8])] = true
		}
		return nil
	})
	if err != nil {
		return sample, fmt.Errorf("bench: count keys in %s: %w", d.dir, err)
	}
	sample.Windows = len(starts)
	err = filepath.WalkDir(d.dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			info, err := e.Info()
			if err != nil {
				return err
			}
			sample.DiskBytes += info.Size()
			switch filepath.Ext(path) {
			case ".sst":
				sample.TableBytes += info.Size()
				sample.Tables++
			case ".log":
				sample.WALBytes += info.Size()
			}
		}
		return nil
	})
	if err != nil {
		return sample, fmt.Errorf("bench: size of %s: %w", d.dir, err)
	}
	return sample, nil
}

// merge sums the tasks' samples of each k that every task reached.
func (s *sampling) merge() ([]StateSample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	byK := map[int]StateSample{}
	tasks := map[int]int{}
	for _, samples := range s.samples {
		for k, x := range samples {
			m := byK[k]
			m.Retentions = k
			m.Processed += x.Processed
			m.Keys += x.Keys
			m.Windows = max(m.Windows, x.Windows)
			m.DiskBytes += x.DiskBytes
			m.TableBytes += x.TableBytes
			m.WALBytes += x.WALBytes
			m.Tables += x.Tables
			byK[k] = m
			tasks[k]++
		}
	}
	var out []StateSample
	for k, m := range byK {
		if tasks[k] == len(s.samples) {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Retentions < out[j].Retentions })
	return out, nil
}
