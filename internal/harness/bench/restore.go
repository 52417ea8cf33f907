package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/checkpoint"
	"github.com/eddy-streams/eddy/examples/ledger/pipeline"
	"github.com/eddy-streams/eddy/internal/harness/versitygw"
	"github.com/eddy-streams/eddy/kafkaclient"
)

// RestoreOptions configure the restore benchmark.
type RestoreOptions struct {
	// Keys is the number of distinct accounts: the state's size.
	Keys int
	// Tail is how many payments are processed after the checkpoint: what
	// a restore from the checkpoint replays from the changelog.
	Tail       int
	Partitions int
	Rounds     int
	// S3 adds the measurement from an S3 store (a local versitygw).
	S3 bool
	// Dir holds the broker-less files of the run (state directories,
	// stores); default a temporary directory, removed at the end.
	Dir string
	// Details prints each task's restore log line.
	Details bool
	// Steady, when positive, ends the run with that many more payments
	// processed with a checkpoint every CheckpointEvery, to measure what
	// periodic checkpoints upload.
	Steady          int
	CheckpointEvery time.Duration
	Out             io.Writer
}

// RestoreResult is one measured resume.
type RestoreResult struct {
	Name  string `json:"name"`
	Round int    `json:"round"`
	// Seconds is from the start of the app to its first committed
	// transaction over new input: what a user waits.
	Seconds float64 `json:"seconds"`
	// RestoreSeconds is the wall time from the assignment of the tasks to
	// the last one restored and open (checkpoint downloads and opens,
	// changelog replays), as the app logs it ("tasks opened").
	RestoreSeconds float64 `json:"restore_seconds"`
	// ReadBytes is what the restores read: changelog records, checkpoint
	// files.
	ReadBytes int64 `json:"read_bytes"`
	// ReplayedRecords are the changelog records replayed.
	ReplayedRecords int64 `json:"replayed_records"`
	// StateBytes is the size of the task databases on disk afterwards.
	StateBytes int64 `json:"state_bytes"`
	// MBPerSec is StateBytes per Seconds.
	MBPerSec float64 `json:"mb_per_second"`
}

const restoreApp = "ledger"

// Restore measures how long the ledger takes to resume with Keys accounts of
// state: on an empty state directory from the changelog alone, from a remote
// checkpoint (a directory, and S3) plus the changelog's tail, and on its
// own state directory after a clean stop.
func Restore(ctx context.Context, opts RestoreOptions) ([]RestoreResult, error) {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	root := opts.Dir
	if root == "" {
		d, err := os.MkdirTemp("", "eddy-bench-restore-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		root = d
	}
	broker, cl, err := startBroker(opts.Partitions)
	if err != nil {
		return nil, err
	}
	defer broker.Close()
	defer cl.Close()
	seeds := []string{broker.Addr()}
	if err := kafkaclient.CreateTopics(ctx, cl, int32(opts.Partitions), inputTopic); err != nil {
		return nil, err
	}
	if err := kafkaclient.CreateTopicsLike(ctx, cl, inputTopic, "balances"); err != nil {
		return nil, err
	}
	dirStore, err := checkpoint.NewDir(filepath.Join(root, "store"))
	if err != nil {
		return nil, err
	}
	r := &restoreRun{opts: opts, seeds: seeds, cl: cl, out: out, local: filepath.Join(root, "local")}

	// Load: one payment per account, then a clean stop, which checkpoints.
	start := time.Now()
	if err := r.produce(ctx, opts.Keys, func(i int) int { return i }); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "produced %d payments, one per account, in %.1fs\n", opts.Keys, time.Since(start).Seconds())
	start = time.Now()
	if _, err := r.resume(ctx, "load", r.local, dirStore); err != nil {
		return nil, err
	}
	cpBytes, err := storeBytes(ctx, dirStore)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "ledger processed them and checkpointed at its stop in %.1fs: state %.1f MB on disk, checkpoint %.1f MB\n",
		time.Since(start).Seconds(), mb(dirBytes(r.local)), mb(cpBytes))

	var s3Store checkpoint.Store
	if opts.S3 {
		srv, err := versitygw.Start(filepath.Join(root, "s3"))
		if err != nil {
			return nil, err
		}
		defer srv.Close()
		if err := srv.CreateBucket(ctx, "eddy-bench"); err != nil {
			return nil, err
		}
		s3, err := checkpoint.NewS3(srv.Options("eddy-bench", "checkpoints"))
		if err != nil {
			return nil, err
		}
		if err := copyStore(ctx, dirStore, s3); err != nil {
			return nil, err
		}
		s3Store = s3
		fmt.Fprintf(out, "copied the checkpoint to S3 (versitygw at %s)\n", srv.Endpoint)
	}

	// The tail: processed after the checkpoint, by a run that takes none.
	if opts.Tail > 0 {
		rng := rand.New(rand.NewPCG(3, 4))
		if err := r.produce(ctx, opts.Tail, func(int) int { return rng.IntN(opts.Keys) }); err != nil {
			return nil, err
		}
		if _, err := r.resume(ctx, "tail", r.local, nil); err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "processed a tail of %d payments after the checkpoint\n", opts.Tail)
	}

	// The measured resumes. Each first gets one new payment per
	// partition, and ends at its first committed transaction over them.
	// The stores are read-only: the final checkpoint of a measured run
	// fails (logged) and the next round starts from the same checkpoint.
	type method struct {
		name  string
		store checkpoint.Store
		local bool
	}
	methods := []method{{name: "changelog"}, {name: "checkpoint-dir", store: readOnly{dirStore}}}
	if s3Store != nil {
		methods = append(methods, method{name: "checkpoint-s3", store: readOnly{s3Store}})
	}
	methods = append(methods, method{name: "local", local: true})
	var results []RestoreResult
	for round := 1; round <= opts.Rounds; round++ {
		order := append([]method(nil), methods...)
		if round%2 == 0 {
			for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
				order[i], order[j] = order[j], order[i]
			}
		}
		for _, m := range order {
			dir := r.local
			if !m.local {
				dir = filepath.Join(root, fmt.Sprintf("%s-%d", m.name, round))
			}
			res, err := r.resume(ctx, m.name, dir, m.store)
			if err != nil {
				return nil, err
			}
			if !m.local {
				os.RemoveAll(dir)
			}
			res.Round = round
			results = append(results, res)
			fmt.Fprintf(out, "round %d  %-15s resume %6.2fs  restore %6.2fs  read %7.1f MB  replayed %8d records  state %6.1f MB  %7.1f MB/s\n",
				round, m.name, res.Seconds, res.RestoreSeconds, mb(res.ReadBytes), res.ReplayedRecords, mb(res.StateBytes), res.MBPerSec)
		}
	}
	if opts.Steady > 0 {
		up, err := r.steady(ctx, dirStore)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "periodic checkpoints (every %v) while %d more payments were processed: %d checkpoints, %.1f MB each on average, %.1f MB uploaded each (%.0f%%), %d checkpoints kept\n",
			opts.CheckpointEvery, opts.Steady, up.n, mb(up.bytes)/float64(max(up.n, 1)), mb(up.uploaded)/float64(max(up.n, 1)),
			100*float64(up.uploaded)/float64(max(up.bytes, 1)), up.kept)
	}
	return results, nil
}

type uploads struct {
	n, kept         int
	bytes, uploaded int64
}

// steady runs the ledger on its own state with periodic checkpoints to the
// (writable) store while it processes opts.Steady payments, and sums what
// the uploads logged.
func (r *restoreRun) steady(ctx context.Context, store checkpoint.Store) (uploads, error) {
	var up uploads
	rng := rand.New(rand.NewPCG(5, 6))
	logs := newLogRecorder()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- eddy.Run(runCtx, pipeline.Topology(inputTopic, "balances"), eddy.Config{
			AppID: restoreApp, Brokers: r.seeds, StateDir: r.local, InstanceID: "bench-restore",
			CheckpointStore: store, CheckpointInterval: r.opts.CheckpointEvery,
			Logger: slog.New(logs),
		})
	}()
	// Spread over several intervals: produce in tenths.
	for i := 0; i < 10; i++ {
		if err := r.produce(ctx, r.opts.Steady/10, func(int) int { return rng.IntN(r.opts.Keys) }); err != nil {
			return up, err
		}
		select {
		case err := <-done:
			return up, fmt.Errorf("bench: steady: the ledger stopped: %w", err)
		case <-time.After(r.opts.CheckpointEvery / 2):
		}
	}
	adm := kadm.NewClient(r.cl)
	for {
		offs, err := adm.FetchOffsets(ctx, restoreApp)
		var sum int64
		if err == nil {
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Topic == inputTopic && o.Err == nil {
					sum += o.At
				}
			})
		}
		if sum >= r.produced {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		return up, err
	}
	for _, rec := range logs.records() {
		if rec.msg == "checkpoint uploaded" {
			up.n++
			up.bytes += rec.int("bytes")
			up.uploaded += rec.int("new_bytes")
		}
	}
	keys, err := checkpoint.ListManifests(ctx, store, checkpoint.TaskPrefix(restoreApp, "0_0"))
	up.kept = len(keys)
	return up, err
}

type restoreRun struct {
	opts     RestoreOptions
	seeds    []string
	cl       *kgo.Client
	out      io.Writer
	local    string
	produced int64
	seq      int
}

// produce writes n payments, payment i to account acct(i).
func (r *restoreRun) produce(ctx context.Context, n int, acct func(i int) int) error {
	errc := make(chan error, 1)
	for i := 0; i < n; i++ {
		r.seq++
		account := fmt.Sprintf("acct-%07d", acct(i))
		v, _ := json.Marshal(pipeline.Payment{ID: fmt.Sprintf("p%d", r.seq), Account: account, Amount: int64(i%1000) - 500})
		r.cl.Produce(ctx, &kgo.Record{Key: []byte(account), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := r.cl.Flush(ctx); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return fmt.Errorf("bench: produce payments: %w", err)
	default:
	}
	r.produced += int64(n)
	return nil
}

// resume runs the ledger on dir with store until its group committed every
// payment produced, then stops it cleanly, and reports what its restores
// logged. Measured runs get one new payment per partition first.
func (r *restoreRun) resume(ctx context.Context, name, dir string, store checkpoint.Store) (RestoreResult, error) {
	if name != "load" && name != "tail" {
		// Spread over the partitions: every task must resume.
		if err := r.produce(ctx, r.opts.Partitions*8, func(i int) int { return (i * 7919) % r.opts.Keys }); err != nil {
			return RestoreResult{}, err
		}
	}
	logs := newLogRecorder()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- eddy.Run(runCtx, pipeline.Topology(inputTopic, "balances"), eddy.Config{
			AppID: restoreApp, Brokers: r.seeds, StateDir: dir,
			// One instance id for every state directory: a new one would
			// wait for the previous run's static membership to expire.
			InstanceID:         "bench-restore",
			CheckpointStore:    store,
			CheckpointInterval: -1, // only at the stop
			Logger:             slog.New(logs),
		})
	}()
	adm := kadm.NewClient(r.cl)
	for {
		select {
		case err := <-done:
			return RestoreResult{}, fmt.Errorf("bench: %s: the ledger stopped: %w", name, err)
		case <-time.After(5 * time.Millisecond):
		}
		offs, err := adm.FetchOffsets(ctx, restoreApp)
		if err != nil {
			continue
		}
		var sum int64
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Topic == inputTopic && o.Err == nil {
				sum += o.At
			}
		})
		if sum >= r.produced {
			break
		}
	}
	secs := time.Since(start).Seconds()
	cancel()
	if err := <-done; err != nil {
		return RestoreResult{}, fmt.Errorf("bench: %s: %w", name, err)
	}
	if errs := logs.errors(); len(errs) > 0 && name != "load" {
		return RestoreResult{}, fmt.Errorf("bench: %s: the ledger logged errors: %s", name, strings.Join(errs, "; "))
	}
	res := RestoreResult{Name: name, Seconds: secs, StateBytes: dirBytes(filepath.Join(dir, restoreApp))}
	for _, rec := range logs.records() {
		if rec.msg == "tasks opened" {
			res.RestoreSeconds += rec.duration("took")
		}
		if rec.msg != "restored state" {
			continue
		}
		if r.opts.Details {
			fmt.Fprintln(r.out, "   ", rec.msg, rec.attrs)
		}
		res.ReadBytes += rec.int("bytes")
		if rec.attrs["source"].String() == "changelog" {
			res.ReplayedRecords += rec.int("records")
		}
	}
	if (name == "changelog" || strings.HasPrefix(name, "checkpoint")) && res.ReplayedRecords == 0 && res.ReadBytes == 0 {
		return res, fmt.Errorf("bench: %s: the ledger restored nothing; the measurement is void", name)
	}
	if strings.HasPrefix(name, "checkpoint") && !logs.has("restored state", "checkpoint") {
		return res, fmt.Errorf("bench: %s: the ledger did not restore from the checkpoint", name)
	}
	res.MBPerSec = mb(res.StateBytes) / secs
	return res, nil
}

// readOnly refuses writes, so that measured runs leave the store as they
// found it.
type readOnly struct{ checkpoint.Store }

var errReadOnly = errors.New("bench: the store is read-only while restores are measured")

func (readOnly) Put(context.Context, string, io.Reader, int64) error { return errReadOnly }
func (readOnly) Delete(context.Context, string) error                { return errReadOnly }

func copyStore(ctx context.Context, from, to checkpoint.Store) error {
	objs, err := from.List(ctx, "")
	if err != nil {
		return err
	}
	for _, o := range objs {
		rd, err := from.Get(ctx, o.Key)
		if err != nil {
			return err
		}
		err = to.Put(ctx, o.Key, rd, o.Size)
		rd.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func storeBytes(ctx context.Context, s checkpoint.Store) (int64, error) {
	objs, err := s.List(ctx, "")
	var n int64
	for _, o := range objs {
		n += o.Size
	}
	return n, err
}

// dirBytes is the size of the regular files under dir, the checkpoints'
// working directory excluded.
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if e.IsDir() && e.Name() == "checkpoints" {
			return filepath.SkipDir
		}
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	return n
}

func mb(b int64) float64 { return float64(b) / 1e6 }

// logRecorder is a slog.Handler that keeps the app's log records.
type logRecorder struct {
	mu   *sync.Mutex
	recs *[]logRecord
}

type logRecord struct {
	msg   string
	level slog.Level
	attrs map[string]slog.Value
}

func (r logRecord) duration(k string) float64 {
	if v, ok := r.attrs[k]; ok && v.Kind() == slog.KindDuration {
		return v.Duration().Seconds()
	}
	return 0
}

func (r logRecord) int(k string) int64 {
	if v, ok := r.attrs[k]; ok && v.Kind() == slog.KindInt64 {
		return v.Int64()
	}
	return 0
}

func newLogRecorder() *logRecorder {
	return &logRecorder{mu: &sync.Mutex{}, recs: &[]logRecord{}}
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{msg: r.Message, level: r.Level, attrs: map[string]slog.Value{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.Resolve()
		return true
	})
	l.mu.Lock()
	*l.recs = append(*l.recs, rec)
	l.mu.Unlock()
	return nil
}

// WithAttrs and WithGroup share the records: the attributes a logger adds
// (the task, the worker) are not needed here.
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

func (l *logRecorder) records() []logRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]logRecord(nil), *l.recs...)
}

func (l *logRecorder) has(msg, source string) bool {
	for _, r := range l.records() {
		if r.msg == msg && r.attrs["source"].String() == source {
			return true
		}
	}
	return false
}

// errors are the error-level messages (the expected failure of the final
// checkpoint to a read-only store is a warning).
func (l *logRecorder) errors() []string {
	var out []string
	for _, r := range l.records() {
		if r.level >= slog.LevelError {
			out = append(out, r.msg)
		}
	}
	return out
}

// MedianRestore returns the median Seconds and RestoreSeconds of the
// results named name.
func MedianRestore(results []RestoreResult, name string) (seconds, restore float64) {
	var s, rs []float64
	for _, r := range results {
		if r.Name == name {
			s, rs = append(s, r.Seconds), append(rs, r.RestoreSeconds)
		}
	}
	return median(s), median(rs)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
