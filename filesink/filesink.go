// Package filesink writes a stream into a directory of files exactly
// once, partitioned into subdirectories and rolled into part files, as
// Flink's filesystem sink does, on eddy's two-phase hook
// (eddy.ToTransactional, docs/design.md §3.7). See docs/files.md.
//
// Each task writes its records into hidden in-progress part files, one per
// partition directory at a time. When the task's Kafka transaction is
// about to commit, Prepare flushes and syncs them and returns a token that
// names them, which eddy keeps in the task's state inside the Kafka
// transaction; once that transaction committed, Commit gives them their
// final, visible names (a hard link, never replacing a file). A task that
// opens after a crash finishes the renames of the token its changelog
// holds and deletes the task's other in-progress files (those of a
// transaction that never committed), so the visible files hold every
// record exactly once. Every directory that gains an entry is synced, so
// that holds through a power loss too, and each owner of a task claims
// its epoch with an exclusive create, which fences the older ones.
//
// With Config.PartitionTime the sink also marks a partition complete, with
// an empty success file, once the stream time of every task writing the
// directory has passed the partition's time plus Config.CommitDelay
// (Flink's partition-time commit trigger and success-file policy), or
// without the tasks idle for Config.IdleTimeout (Flink's idleness).
package filesink

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/eddy-streams/eddy"
)

// Config configures To.
type Config[K, V any] struct {
	// Dir is the directory the files are written under. It belongs to
	// one sink of one app: the sink refuses a directory another sink
	// owns.
	Dir string
	// Partition appends the partition directory of r, relative to Dir,
	// to dst: "dt=2026-01-01/hm=12:00", '/' between levels. Nil: every
	// record goes to Dir itself. The partition must be a relative path
	// of names that do not start with '.' or '_' (hidden, as Flink and
	// Hadoop read them).
	Partition func(dst []byte, r eddy.Record[K, V]) []byte
	// Encode appends r's bytes, as a line of the file (its line break
	// included), to dst. An error is the record's fault: the app's
	// produce-error policy (eddy.Config.OnProduceError) decides.
	Encode func(dst []byte, r eddy.Record[K, V]) ([]byte, error)
	// Suffix ends the part files' names (".csv"). Default none.
	Suffix string
	// RollSize and RollInterval roll a part file within a transaction:
	// a record that would take it past RollSize bytes, or that comes
	// RollInterval after it was opened, starts a new one (the age is
	// checked once per 1,024 records, as Flink checks it at an
	// interval). Every commit
	// also closes the task's open part files (an in-progress file
	// becomes visible only at a commit). Defaults 128 MiB and 30
	// minutes, Flink's.
	RollSize     int64
	RollInterval time.Duration
	// PartitionTime, if not nil, turns on success files: it returns the
	// time (ms since the epoch) of a partition directory ("dt=2026-01-01/
	// hm=12:00" → its minute's start), and ok false for a directory that
	// is not a partition but holds partitions ("dt=2026-01-01").
	PartitionTime func(partition string) (ms int64, ok bool)
	// CommitDelay: a partition is complete once the stream time of every
	// task writing the directory reached its time plus CommitDelay (for
	// partitions of a minute, with records in time order, a minute).
	CommitDelay time.Duration
	// SuccessFile is the name of the file that marks a partition
	// complete. Default "_SUCCESS".
	SuccessFile string
	// Tasks is how many tasks write the directory: the partition count
	// of the topics the sink's sub-topology reads. A partition is
	// complete only once all of them reported their stream time. The
	// time files of other tasks (beyond Tasks, or of another
	// sub-topology: the app's partitions or topology changed) are stale
	// and ignored. Default 1.
	Tasks int
	// IdleTimeout, if positive, lets idle tasks stop holding success
	// files back, as Flink's idle sources stop holding its watermark: a
	// task whose time file has not been written for IdleTimeout (by the
	// file's modification time) is idle, and the partitions are marked
	// from the other tasks' stream times. A task writes its time file
	// when it opens, when its stream time moves, and at least every
	// IdleTimeout/2 while it commits part files. Records an idle task
	// writes later may land in a partition already marked, as late
	// records do. Zero (the default): a task that never commits a stream
	// time holds every partition back.
	IdleTimeout time.Duration
}

// Defaults of Config.
const (
	DefaultRollSize     = 128 << 20
	DefaultRollInterval = 30 * time.Minute
	DefaultSuccessFile  = "_SUCCESS"
)

// metaDir is the sink's own directory under Config.Dir: the owner, each
// task's epoch and each task's committed stream time. Hidden, so no
// reader of the partitions takes it for data.
const metaDir = ".eddy"

// To writes s into files under cfg.Dir exactly once, in step with the
// task's Kafka transactions (eddy.ToTransactional, named name). Under
// eddy.AtLeastOnce the records are written at least once.
func To[K, V any](s eddy.Stream[K, V], name string, cfg Config[K, V]) {
	eddy.ToTransactional(s, name, func(task eddy.SinkTask) (eddy.TransactionalSink[K, V], error) {
		if err := cfg.check(task); err != nil {
			return nil, err
		}
		return newSink(cfg, task), nil
	})
}

func (cfg *Config[K, V]) check(task eddy.SinkTask) error {
	switch {
	case cfg.Dir == "":
		return errors.New("eddy: filesink: Config.Dir is empty: name the directory to write the files under")
	case cfg.Encode == nil:
		return errors.New("eddy: filesink: Config.Encode is nil: pass the function that encodes a record as a line")
	case cfg.RollSize < 0 || cfg.RollInterval < 0 || cfg.CommitDelay < 0 || cfg.Tasks < 0 || cfg.IdleTimeout < 0:
		return errors.New("eddy: filesink: Config.RollSize, RollInterval, CommitDelay, Tasks and IdleTimeout cannot be negative")
	case strings.ContainsAny(cfg.Suffix, `/\`):
		return fmt.Errorf("eddy: filesink: Config.Suffix %q: a file name's end cannot hold a path separator", cfg.Suffix)
	}
	if cfg.RollSize == 0 {
		cfg.RollSize = DefaultRollSize
	}
	if cfg.RollInterval == 0 {
		cfg.RollInterval = DefaultRollInterval
	}
	if cfg.SuccessFile == "" {
		cfg.SuccessFile = DefaultSuccessFile
	}
	if cfg.Tasks == 0 {
		cfg.Tasks = 1
	}
	_, p, _ := strings.Cut(task.Task, "_")
	if n, err := strconv.Atoi(p); err == nil && n >= cfg.Tasks && cfg.PartitionTime != nil {
		return fmt.Errorf("eddy: filesink: task %s writes the directory, but Config.Tasks is %d: set Tasks to the partition count of the topics the sink's sub-topology reads, so that a partition is complete only once every task passed it", task.Task, cfg.Tasks)
	}
	return nil
}

// sink is one task's sink.
type sink[K, V any] struct {
	cfg  Config[K, V]
	task eddy.SinkTask
	// epoch is this owner's, raised by Recover; seq numbers the part
	// files it opens.
	epoch, seq int64
	// open is the part file being written per partition; files lists
	// the transaction's part files, open and rolled, in order.
	open  map[string]*partFile
	files []*partFile
	// last is the part file of the last record, lastPart its partition:
	// consecutive records of one partition skip the map.
	last     *partFile
	lastPart []byte
	part     []byte // Partition's buffer
	line     []byte // Encode's buffer
	writes   int    // Writes since the last roll-by-time check
	// dirs are the partition directories known to exist.
	dirs map[string]bool
	// streamTime is the task's, as PrepareAt last said; prepared is the
	// stream time of the last token (committed or prepared).
	streamTime, prepared int64
	// reported is the stream time this task last wrote to its time
	// file, at reportedAt; checked the directory's stream time (the
	// tasks' minimum) the last success pass saw; done the partitions
	// marked complete.
	reported, checked int64
	reportedAt        time.Time
	done              map[string]bool
	token             []byte
	// onSync, if set (by tests), is told each directory synced.
	onSync func(dir string)
}

// partFile is one in-progress part file.
type partFile struct {
	partition string
	seq       int64
	f         *os.File
	w         *bufio.Writer
	size      int64
	opened    time.Time
}

func newSink[K, V any](cfg Config[K, V], task eddy.SinkTask) *sink[K, V] {
	return &sink[K, V]{cfg: cfg, task: task, open: map[string]*partFile{}, dirs: map[string]bool{}, done: map[string]bool{},
		streamTime: math.MinInt64, prepared: math.MinInt64, reported: math.MinInt64, checked: math.MinInt64}
}

// unavailable wraps an I/O error: the directory's fault, not the record's.
func unavailable(err error) error {
	return fmt.Errorf("%w: filesink: %w", eddy.ErrSinkUnavailable, err)
}

// inProgressName and finalName name a part file of this task.
func (s *sink[K, V]) inProgressName(epoch, seq int64) string {
	return "." + s.finalName(epoch, seq) + ".inprogress"
}

func (s *sink[K, V]) finalName(epoch, seq int64) string {
	return "part-" + s.task.Task + "-" + strconv.FormatInt(epoch, 10) + "-" + strconv.FormatInt(seq, 10) + s.cfg.Suffix
}

func (s *sink[K, V]) meta(name string) string {
	return filepath.Join(s.cfg.Dir, metaDir, name)
}

// Recover claims the directory for this sink, raises the task's epoch
// (fencing its earlier owners), commits the token's part files if they
// are not yet, deletes the task's other in-progress files, and reports
// the committed stream time.
func (s *sink[K, V]) Recover(committed []byte) error {
	if err := s.mkdirAll(filepath.Join(s.cfg.Dir, metaDir)); err != nil {
		return unavailable(err)
	}
	owner := s.task.AppID + "/" + s.task.Sink
	b, err := os.ReadFile(s.meta("owner"))
	if errors.Is(err, fs.ErrNotExist) {
		// The sink's tasks open at once: the first to link its
		// owner file claims the directory, the others read it.
		if err := s.writeSynced(s.meta("owner"), []byte(owner)); err != nil && !errors.Is(err, fs.ErrExist) {
			return unavailable(err)
		}
		b, err = os.ReadFile(s.meta("owner"))
	}
	switch {
	case err != nil:
		return unavailable(err)
	case string(b) != owner:
		return fmt.Errorf("eddy: filesink: %s is the directory of sink %s, not of %s: give each sink its own Config.Dir", s.cfg.Dir, b, owner)
	}
	if err := s.claimEpoch(); err != nil {
		return err
	}
	streamTime := int64(math.MinInt64) // none committed
	if committed != nil {
		t, err := decodeToken(committed)
		if err != nil {
			return err
		}
		if err := s.rename(t, true); err != nil {
			return err
		}
		streamTime, s.prepared = t.streamTime, t.streamTime
	}
	if err := s.deleteInProgress(); err != nil {
		return err
	}
	// Reported even without a committed time, so that the task's time
	// file exists (and ages, for Config.IdleTimeout) from its open on.
	return s.report(streamTime, true)
}

// epochsDir holds the task's epoch claims: an empty file per epoch,
// named by it, created exclusively.
func (s *sink[K, V]) epochsDir() string { return s.meta(s.task.Task + ".epochs") }

// claimEpoch makes this owner the task's newest: it creates the claim of
// the epoch after the highest one, exclusively (O_EXCL), so that two
// owners opening at once can never both hold the highest epoch; the one
// that loses the race takes the next. The highest claim is the task's
// epoch, and Prepare fences every owner below it. Claims below its own
// are deleted, never the highest: an owner that claims an epoch freed so
// (from a stale listing) shares it with an owner already fenced and is
// below the highest, so fenced too — it can open in-progress files (each
// created exclusively, so never another's) but never commit one.
func (s *sink[K, V]) claimEpoch() error {
	dir := s.epochsDir()
	if err := s.mkdirAll(dir); err != nil {
		return unavailable(err)
	}
	high, err := s.readEpoch()
	if err != nil {
		return err
	}
	e, err := s.claimAfter(high)
	if err != nil {
		return err
	}
	s.epoch, s.seq = e, 0
	entries, err := os.ReadDir(dir)
	if err != nil {
		return unavailable(err)
	}
	for _, en := range entries {
		if old, err := strconv.ParseInt(en.Name(), 10, 64); err == nil && old < e {
			removeMissing(filepath.Join(dir, en.Name())) // only tidies: a claim left behind fences nothing
		}
	}
	return nil
}

// claimAfter claims the first epoch after high that no owner holds: high
// is the highest claim listed, and another owner may have claimed more
// since the listing.
func (s *sink[K, V]) claimAfter(high int64) (int64, error) {
	for e := high + 1; ; e++ {
		f, err := os.OpenFile(filepath.Join(s.epochsDir(), strconv.FormatInt(e, 10)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue // another owner claimed it since the listing
		}
		if err != nil {
			return 0, unavailable(err)
		}
		if err := errors.Join(f.Close(), s.syncDir(s.epochsDir())); err != nil {
			return 0, unavailable(err)
		}
		return e, nil
	}
}

// readEpoch returns the task's highest claimed epoch, 0 if none.
func (s *sink[K, V]) readEpoch() (int64, error) {
	entries, err := os.ReadDir(s.epochsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, unavailable(err)
	}
	var high int64
	for _, en := range entries {
		e, err := strconv.ParseInt(en.Name(), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("eddy: filesink: %s holds %q, not an epoch's claim: the sink's own files were changed", s.epochsDir(), en.Name())
		}
		high = max(high, e)
	}
	return high, nil
}

// deleteInProgress deletes the task's in-progress part files under Dir of
// earlier epochs: those of transactions that were not committed. A newer
// owner's (this one was fenced meanwhile) are left to it.
func (s *sink[K, V]) deleteInProgress() error {
	prefix := ".part-" + s.task.Task + "-"
	err := filepath.WalkDir(s.cfg.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == metaDir && filepath.Dir(path) == filepath.Clean(s.cfg.Dir) {
				return filepath.SkipDir
			}
			return nil
		}
		rest, ok := strings.CutPrefix(d.Name(), prefix)
		if !ok || !strings.HasSuffix(rest, ".inprogress") {
			return nil
		}
		epoch, _, _ := strings.Cut(rest, "-")
		if e, err := strconv.ParseInt(epoch, 10, 64); err == nil && e >= s.epoch {
			return nil
		}
		return os.Remove(path)
	})
	if err != nil {
		return unavailable(err)
	}
	return nil
}

// Write appends r to the open part file of its partition.
func (s *sink[K, V]) Write(r eddy.Record[K, V]) error {
	var err error
	s.line, err = s.cfg.Encode(s.line[:0], r)
	if err != nil {
		return err
	}
	if s.cfg.Partition != nil {
		s.part = s.cfg.Partition(s.part[:0], r)
	}
	f := s.last
	if f == nil || !bytes.Equal(s.part, s.lastPart) {
		f = s.open[string(s.part)]
		s.lastPart = append(s.lastPart[:0], s.part...)
	}
	if f != nil && f.size > 0 && f.size+int64(len(s.line)) > s.cfg.RollSize {
		f = nil
	}
	if s.writes++; s.writes >= 1024 {
		// The clock is read once per 1,024 writes, not per record.
		s.writes = 0
		if f != nil && time.Since(f.opened) >= s.cfg.RollInterval {
			f = nil
		}
	}
	if f == nil {
		if f, err = s.openFile(string(s.part)); err != nil {
			return err
		}
	}
	s.last = f
	if _, err := f.w.Write(s.line); err != nil {
		return unavailable(err)
	}
	f.size += int64(len(s.line))
	return nil
}

// openFile starts a new part file in partition, rolling the open one.
func (s *sink[K, V]) openFile(partition string) (*partFile, error) {
	if !s.dirs[partition] {
		if err := checkPartition(partition); err != nil {
			return nil, err
		}
		if err := s.mkdirAll(filepath.Join(s.cfg.Dir, partition)); err != nil {
			return nil, unavailable(err)
		}
		s.dirs[partition] = true
	}
	if old := s.open[partition]; old != nil {
		if err := old.close(); err != nil {
			return nil, unavailable(err)
		}
	}
	s.seq++
	name := filepath.Join(s.cfg.Dir, partition, s.inProgressName(s.epoch, s.seq))
	osf, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, unavailable(err)
	}
	f := &partFile{partition: partition, seq: s.seq, f: osf, w: bufio.NewWriterSize(osf, 64<<10), opened: time.Now()}
	s.open[partition] = f
	s.files = append(s.files, f)
	return f, nil
}

// checkPartition refuses a partition that is not a plain relative path
// of visible names.
func checkPartition(p string) error {
	if p == "" {
		return nil
	}
	for _, name := range strings.Split(p, "/") {
		if name == "" || name == ".." || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || strings.ContainsRune(name, '\\') {
			return fmt.Errorf("eddy: filesink: partition %q: want a relative path of names that are not empty and do not start with '.' or '_' (hidden)", p)
		}
	}
	return nil
}

// mkdirAll creates dir and its missing parents (Dir itself, .eddy, a
// partition's levels), syncing each parent that gained one, as Pebble's
// and litestream's file systems do: a created entry is durable only once
// its directory is synced, so a power loss could otherwise lose a
// directory whose files a committed token names.
func (s *sink[K, V]) mkdirAll(dir string) error {
	dir = filepath.Clean(dir)
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := s.mkdirAll(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		// Another task made it just now: synced here too, not to
		// depend on that task's sync having finished.
	}
	return s.syncDir(parent)
}

// PrepareAt takes the task's stream time (eddy.StreamTimeSink).
func (s *sink[K, V]) PrepareAt(streamTime int64) { s.streamTime = streamTime }

// Prepare flushes and syncs the transaction's part files and returns the
// token naming them, with the task's stream time; nil if there are none
// and stream time did not move (or no success files are written).
func (s *sink[K, V]) Prepare() ([]byte, []eddy.Refusal, error) {
	moved := s.cfg.PartitionTime != nil && s.streamTime > s.prepared
	if len(s.files) == 0 && !moved {
		return nil, nil, nil
	}
	dirs := map[string]bool{}
	for _, f := range s.files {
		if err := f.close(); err != nil {
			return nil, nil, unavailable(err)
		}
		dirs[f.partition] = true
	}
	for p := range dirs {
		// The in-progress files' names must survive a crash too.
		if err := s.syncDir(filepath.Join(s.cfg.Dir, p)); err != nil {
			return nil, nil, unavailable(err)
		}
	}
	e, err := s.readEpoch()
	if err != nil {
		return nil, nil, err
	}
	if e != s.epoch {
		return nil, nil, fmt.Errorf("%w: filesink: the task's epoch is %d, this owner's %d", eddy.ErrSinkFenced, e, s.epoch)
	}
	t := token{epoch: s.epoch, streamTime: max(s.streamTime, s.prepared)}
	for _, f := range s.files {
		t.files = append(t.files, tokenFile{partition: f.partition, seq: f.seq})
	}
	s.token = t.append(s.token[:0])
	s.prepared = t.streamTime
	s.forget()
	return s.token, nil, nil
}

// forget drops the transaction's part files from memory (not from disk).
func (s *sink[K, V]) forget() {
	clear(s.open)
	clear(s.files)
	s.files = s.files[:0]
	s.last = nil
}

// Commit renames the token's part files to their final names, then
// reports the stream time and marks the partitions it completed.
func (s *sink[K, V]) Commit(tok []byte) error {
	t, err := decodeToken(tok)
	if err != nil {
		return err
	}
	if err := s.rename(t, false); err != nil {
		return err
	}
	return s.report(t.streamTime, len(t.files) > 0)
}

// rename gives t's in-progress files their final names, skipping those
// renamed already, and syncs their directories. A file found under
// neither name is an error, except when recovering: a committed file may
// have been moved away since by a reader of the directory.
//
// The final name is given by a hard link, then the in-progress name is
// removed, rather than by rename(2), which would silently replace a file
// of that name. Names are unique while the sink's own files are (an
// epoch is claimed once, a sequence number used once per epoch), but if
// .eddy is deleted while part files stay, epochs start again and a
// rename would overwrite committed files; the link refuses instead. A
// crash between link and remove leaves both names on one file, which
// the next attempt tells apart (os.SameFile) and finishes.
func (s *sink[K, V]) rename(t token, recovering bool) error {
	dirs := map[string]bool{}
	for _, f := range t.files {
		dir := filepath.Join(s.cfg.Dir, f.partition)
		from, final := filepath.Join(dir, s.inProgressName(t.epoch, f.seq)), filepath.Join(dir, s.finalName(t.epoch, f.seq))
		err := os.Link(from, final)
		switch {
		case errors.Is(err, fs.ErrExist):
			err = sameFile(from, final)
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			err = unavailable(err)
		}
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Stat(final); serr == nil || recovering {
				continue // committed already
			}
			return fmt.Errorf("eddy: filesink: the prepared part file %s is gone: was the directory changed by hand?", final)
		}
		if err != nil {
			return err
		}
		if err := removeMissing(from); err != nil {
			return unavailable(err)
		}
		dirs[dir] = true
	}
	for d := range dirs {
		if err := s.syncDir(d); err != nil {
			return unavailable(err)
		}
	}
	return nil
}

// sameFile returns nil if from and final are one file (linked before a
// crash), an fs.ErrNotExist error if from is gone, and otherwise refuses
// to replace final.
func sameFile(from, final string) error {
	a, err := os.Stat(from)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return unavailable(err)
	}
	b, err := os.Stat(final)
	if err != nil {
		return unavailable(err)
	}
	if !os.SameFile(a, b) {
		return fmt.Errorf("eddy: filesink: %s exists already, and committing would replace it: were the sink's own files (%s) deleted while its part files stayed? Move the part files away, or give the sink a new Config.Dir", final, metaDir)
	}
	return nil
}

// Abort deletes the open transaction's part files and those of token.
func (s *sink[K, V]) Abort(tok []byte) error {
	var errs []error
	for _, f := range s.files {
		f.close() // deleted next: a failed flush does not matter
		errs = append(errs, removeMissing(filepath.Join(s.cfg.Dir, f.partition, s.inProgressName(s.epoch, f.seq))))
	}
	s.forget()
	if tok != nil {
		t, err := decodeToken(tok)
		if err != nil {
			return err
		}
		for _, f := range t.files {
			errs = append(errs, removeMissing(filepath.Join(s.cfg.Dir, f.partition, s.inProgressName(t.epoch, f.seq))))
		}
		// The token's stream time was not committed.
		s.prepared = s.reported
	}
	if err := errors.Join(errs...); err != nil {
		return unavailable(err)
	}
	return nil
}

func removeMissing(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Close closes the open part files; the next owner's Recover deletes them.
func (s *sink[K, V]) Close() error {
	for _, f := range s.files {
		f.f.Close()
	}
	s.forget()
	return nil
}

func (f *partFile) close() error {
	if f.f == nil {
		return nil
	}
	err := f.w.Flush()
	if err == nil {
		err = f.f.Sync()
	}
	err = errors.Join(err, f.f.Close())
	f.f = nil
	return err
}

// report writes the task's committed stream time to its time file, then
// marks complete the partitions that every task's stream time passed.
// busy says the task opened or committed part files: with
// Config.IdleTimeout, the file is then written at least every half of it,
// even if stream time stood still, so that the task is not taken for
// idle.
func (s *sink[K, V]) report(streamTime int64, busy bool) error {
	if s.cfg.PartitionTime == nil {
		return nil
	}
	refresh := busy && (s.reportedAt.IsZero() || s.cfg.IdleTimeout > 0 && time.Since(s.reportedAt) >= s.cfg.IdleTimeout/2)
	if streamTime <= s.reported && !refresh {
		return nil
	}
	streamTime = max(streamTime, s.reported)
	// Not synced: a time lost in a crash is reported again by the next
	// commit, and a success file written from it is right regardless.
	if err := writeAtomic(s.meta(s.task.Task+".time"), strconv.AppendInt(nil, streamTime, 10)); err != nil {
		return unavailable(err)
	}
	s.reported, s.reportedAt = streamTime, time.Now()
	low, err := s.directoryTime()
	if err != nil || low <= s.checked {
		return err
	}
	if err := s.markComplete(low); err != nil {
		return err
	}
	s.checked = low
	return nil
}

// directoryTime is the lowest stream time the current tasks reported, or
// math.MinInt64 until all Config.Tasks did. The time files of other tasks
// (another sub-topology, a partition at or beyond Tasks: the app's
// partitions or topology changed since they were written) are stale:
// those tasks no longer write the directory, so they neither count nor
// hold it back. With Config.IdleTimeout, a task whose file is older than
// it is idle: it counts, but does not hold the directory back.
func (s *sink[K, V]) directoryTime() (int64, error) {
	entries, err := os.ReadDir(filepath.Join(s.cfg.Dir, metaDir))
	if err != nil {
		return 0, unavailable(err)
	}
	sub, _, _ := strings.Cut(s.task.Task, "_")
	low, n := int64(math.MaxInt64), 0
	for _, e := range entries {
		task, ok := strings.CutSuffix(e.Name(), ".time")
		if !ok {
			continue
		}
		if tsub, p, ok := strings.Cut(task, "_"); ok {
			if i, err := strconv.Atoi(p); err == nil && (tsub != sub || i >= s.cfg.Tasks) {
				continue // stale
			}
		}
		b, err := os.ReadFile(filepath.Join(s.cfg.Dir, metaDir, e.Name()))
		if err != nil {
			return 0, unavailable(err)
		}
		t, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("eddy: filesink: %s holds %q, not a time: the sink's own files were changed", e.Name(), b)
		}
		n++
		if s.cfg.IdleTimeout > 0 {
			info, err := e.Info()
			if err != nil {
				return 0, unavailable(err)
			}
			if time.Since(info.ModTime()) >= s.cfg.IdleTimeout {
				continue // idle
			}
		}
		low = min(low, t)
	}
	if n < s.cfg.Tasks || low == math.MaxInt64 {
		return math.MinInt64, nil
	}
	return low, nil
}

// markComplete writes the success file of every partition under Dir whose
// time plus CommitDelay is at most low and that has none yet.
func (s *sink[K, V]) markComplete(low int64) error {
	root := filepath.Clean(s.cfg.Dir)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() || path == root {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") {
			return filepath.SkipDir
		}
		rel := filepath.ToSlash(path[len(root)+1:])
		at, ok := s.cfg.PartitionTime(rel)
		if !ok {
			return nil // holds partitions
		}
		if !s.done[rel] && at <= low-s.cfg.CommitDelay.Milliseconds() {
			if err := os.WriteFile(filepath.Join(path, s.cfg.SuccessFile), nil, 0o644); err != nil {
				return err
			}
			s.done[rel] = true
		}
		return filepath.SkipDir
	})
	if err != nil {
		return unavailable(err)
	}
	return nil
}

// token is what Prepare returns: the owner's epoch, the task's stream
// time and the part files of the transaction.
type token struct {
	epoch, streamTime int64
	files             []tokenFile
}

type tokenFile struct {
	partition string
	seq       int64
}

// tokenVersion is the first byte of a token, so that a later layout can
// be told from this one.
const tokenVersion = 1

func (t token) append(b []byte) []byte {
	b = append(b, tokenVersion)
	b = binary.AppendVarint(b, t.epoch)
	b = binary.AppendVarint(b, t.streamTime)
	b = binary.AppendUvarint(b, uint64(len(t.files)))
	for _, f := range t.files {
		b = binary.AppendUvarint(b, uint64(len(f.partition)))
		b = append(b, f.partition...)
		b = binary.AppendVarint(b, f.seq)
	}
	return b
}

var errToken = errors.New("eddy: filesink: the task's committed token does not decode: its state holds another sink's token, or a newer eddy's")

func decodeToken(b []byte) (token, error) {
	var t token
	if len(b) == 0 || b[0] != tokenVersion {
		return t, errToken
	}
	b = b[1:]
	varint := func() int64 {
		v, n := binary.Varint(b)
		if n <= 0 {
			b = nil
			return 0
		}
		b = b[n:]
		return v
	}
	uvarint := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			b = nil
			return 0
		}
		b = b[n:]
		return v
	}
	t.epoch, t.streamTime = varint(), varint()
	n := uvarint()
	if b == nil || n > uint64(len(b)) {
		return t, errToken
	}
	for range n {
		l := uvarint()
		if b == nil || l > uint64(len(b)) {
			return t, errToken
		}
		p := string(b[:l])
		b = b[l:]
		seq := varint()
		if b == nil {
			return t, errToken
		}
		t.files = append(t.files, tokenFile{partition: p, seq: seq})
	}
	if len(b) != 0 {
		return t, errToken
	}
	return t, nil
}

// writeSynced creates path with data, durably and only if it does not
// exist (an fs.ErrExist error then): a synced temporary file of its own
// linked into place, then the directory synced.
func (s *sink[K, V]) writeSynced(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	if err := os.Link(f.Name(), path); err != nil {
		return err
	}
	return s.syncDir(filepath.Dir(path))
}

// writeAtomic writes data to path atomically, not durably, through a
// temporary file of its own: two owners of a task (a zombie and its
// successor) may write at once.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err = errors.Join(err, f.Close()); err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// syncDir makes the entries created in, renamed into or removed from dir
// durable: fsync of the directory, as Pebble's vfs SyncDir.
func (s *sink[K, V]) syncDir(dir string) error {
	if s.onSync != nil {
		s.onSync(dir)
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
