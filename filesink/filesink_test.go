package filesink

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// secondPartitions is the tests' config: a partition per second of the
// record's timestamp ("s=3"), the value as the line, success files a
// second after the partition's start.
func secondPartitions(dir string) Config[string, string] {
	return Config[string, string]{
		Dir: dir,
		Partition: func(dst []byte, r eddy.Record[string, string]) []byte {
			return strconv.AppendInt(append(dst, "s="...), r.Timestamp/1000, 10)
		},
		Encode: func(dst []byte, r eddy.Record[string, string]) ([]byte, error) {
			if strings.Contains(r.Value, "\n") {
				return dst, errors.New("a line break in the value")
			}
			return append(append(dst, r.Value...), '\n'), nil
		},
		Suffix: ".txt",
		PartitionTime: func(p string) (int64, bool) {
			s, ok := strings.CutPrefix(p, "s=")
			n, err := strconv.ParseInt(s, 10, 64)
			return n * 1000, ok && err == nil
		},
		CommitDelay: time.Second,
	}
}

// listing is what dir holds: the visible lines per partition (sorted),
// the partitions marked complete, and the hidden part files left.
type listing struct {
	lines      map[string][]string
	complete   []string
	inProgress []string
}

func list(t *testing.T, dir string) listing {
	t.Helper()
	l := listing{lines: map[string][]string{}}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			if d != nil && d.Name() == metaDir {
				return filepath.SkipDir
			}
			return err
		}
		part := filepath.ToSlash(filepath.Dir(path[len(dir)+1:]))
		switch name := d.Name(); {
		case name == DefaultSuccessFile:
			l.complete = append(l.complete, part)
		case strings.HasSuffix(name, ".inprogress"):
			l.inProgress = append(l.inProgress, path)
		case strings.HasPrefix(name, "part-") && strings.HasSuffix(name, ".txt"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			l.lines[part] = append(l.lines[part], strings.Fields(string(b))...)
		default:
			return fmt.Errorf("unexpected file %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range l.lines {
		slices.Sort(v)
	}
	slices.Sort(l.complete)
	return l
}

func (l listing) String() string {
	return fmt.Sprintf("lines %v, complete %v, in progress %v", l.lines, l.complete, l.inProgress)
}

func newDriver(t *testing.T, cfg Config[string, string]) (*eddytest.Driver, *eddytest.InputTopic[string, string]) {
	t.Helper()
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "in", serde.String(), serde.String())
	To(in, "files", cfg)
	d, err := eddytest.New(topo, eddytest.Options{Config: eddy.Config{AppID: "app", OnProduceError: eddy.DeadLetter}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, eddytest.Input(d, "in", serde.String(), serde.String())
}

// TestToInTheCycle: records become visible only when their transaction
// commits, in their partitions' directories; an aborted transaction
// leaves nothing; a record the encoder refuses is dead-lettered; a
// partition is marked complete once stream time passed its end, and the
// end of input completes the rest.
func TestToInTheCycle(t *testing.T) {
	dir := t.TempDir()
	d, in := newDriver(t, secondPartitions(dir))
	err := d.Transaction(func() error {
		for i, ts := range []int64{100, 900, 1500} {
			if err := in.Pipe("k", fmt.Sprint("a", i), ts); err != nil {
				return err
			}
		}
		if l := list(t, dir); len(l.lines) != 0 || len(l.inProgress) != 2 {
			t.Errorf("before the commit: %v; want only two in-progress files", l)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	l := list(t, dir)
	// Stream time 1500 passed s=0's end (its time 0 plus a second).
	if got := fmt.Sprint(l.lines); got != "map[s=0:[a0 a1] s=1:[a2]]" || len(l.inProgress) != 0 || fmt.Sprint(l.complete) != "[s=0]" {
		t.Fatalf("after the commit: %v", l)
	}

	boom := errors.New("boom")
	err = d.Transaction(func() error {
		if err := in.Pipe("k", "lost", 1600); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("the failed transaction: %v", err)
	}
	if l := list(t, dir); fmt.Sprint(l.lines) != "map[s=0:[a0 a1] s=1:[a2]]" || len(l.inProgress) != 0 {
		t.Fatalf("after an aborted transaction: %v", l)
	}

	if err := in.Pipe("k", "bad\nline", 1700); err != nil {
		t.Fatalf("a record the encoder refuses: %v, want it dead-lettered", err)
	}
	dead, err := eddytest.Output(d, eddy.DeadLetterTopic("in"), serde.String(), serde.String()).ReadAll()
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters %v (%v), want the refused record", dead, err)
	}

	// Stream time 2000 reaches s=1's end (1000 + 1 s).
	if err := in.Pipe("k", "b", 2000); err != nil {
		t.Fatal(err)
	}
	if l := list(t, dir); fmt.Sprint(l.complete) != "[s=0 s=1]" {
		t.Fatalf("at stream time 2000: %v, want s=0 and s=1 complete", l)
	}
	if err := d.EndOfInput(); err != nil {
		t.Fatal(err)
	}
	l = list(t, dir)
	if fmt.Sprint(l.complete) != "[s=0 s=1 s=2]" || fmt.Sprint(l.lines) != "map[s=0:[a0 a1] s=1:[a2] s=2:[b]]" || len(l.inProgress) != 0 {
		t.Fatalf("after the end of input: %v, want every partition complete", l)
	}
}

// TestToRolls: a part file rolls at RollSize, and every commit closes the
// open ones.
func TestToRolls(t *testing.T) {
	dir := t.TempDir()
	cfg := secondPartitions(dir)
	cfg.RollSize = 10 // two 4-byte lines (with their line breaks) per file
	d, in := newDriver(t, cfg)
	err := d.Transaction(func() error {
		for i := range 5 {
			if err := in.Pipe("k", fmt.Sprint("v00", i), 10); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Pipe("k", "v005", 20); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "s=0", "part-0_0-*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// 5 lines in one transaction: 3 files; one line in the next: 1.
	if len(files) != 4 {
		t.Errorf("%d part files (%v), want 4", len(files), files)
	}
	if l := list(t, dir); len(l.lines["s=0"]) != 6 {
		t.Errorf("%v, want 6 lines", l)
	}
}

// sinkOf opens a task's sink directly, as eddy does, and recovers it.
func sinkOf(t *testing.T, cfg Config[string, string], task string, committed []byte) *sink[string, string] {
	t.Helper()
	st := eddy.SinkTask{AppID: "app", Sink: "files", Task: task}
	if err := cfg.check(st); err != nil {
		t.Fatal(err)
	}
	s := newSink(cfg, st)
	if err := s.Recover(committed); err != nil {
		t.Fatal(err)
	}
	return s
}

func write(t *testing.T, s *sink[string, string], value string, ts int64) {
	t.Helper()
	if err := s.Write(eddy.Record[string, string]{Value: value, Timestamp: ts}); err != nil {
		t.Fatal(err)
	}
}

func prepare(t *testing.T, s *sink[string, string], streamTime int64) []byte {
	t.Helper()
	s.PrepareAt(streamTime)
	tok, refused, err := s.Prepare()
	if err != nil || refused != nil {
		t.Fatalf("prepare: %v, %v", err, refused)
	}
	return slices.Clone(tok)
}

// commit prepares s's transaction at streamTime and commits it.
func commit(t *testing.T, s *sink[string, string], streamTime int64) {
	t.Helper()
	if err := s.Commit(prepare(t, s, streamTime)); err != nil {
		t.Fatal(err)
	}
}

// TestRecover: the crash windows. A token prepared and committed by the
// changelog, but whose files were not renamed, is finished by the next
// owner's Recover; the in-progress files of a transaction the changelog
// does not name are deleted; the old owner is fenced.
func TestRecover(t *testing.T) {
	dir := t.TempDir()
	cfg := secondPartitions(dir)
	s := sinkOf(t, cfg, "0_0", nil)
	write(t, s, "one", 100)
	write(t, s, "two", 1100)
	committed := prepare(t, s, 1100)
	// The Kafka transaction committed, then the process died: no rename.
	write(t, s, "three", 1200)
	prepare(t, s, 1200) // prepared, its Kafka transaction never committed
	write(t, s, "four", 1300)
	// Written, never prepared: still buffered, so flush it as a crash
	// after a roll would have left it on disk.
	if err := s.last.close(); err != nil {
		t.Fatal(err)
	}
	if l := list(t, dir); len(l.lines) != 0 || len(l.inProgress) != 4 {
		t.Fatalf("before recovery: %v", l)
	}

	next := sinkOf(t, cfg, "0_0", committed)
	l := list(t, dir)
	if fmt.Sprint(l.lines) != "map[s=0:[one] s=1:[two]]" || len(l.inProgress) != 0 {
		t.Fatalf("after recovery: %v, want the committed token's lines only", l)
	}
	if fmt.Sprint(l.complete) != "[s=0]" {
		t.Errorf("complete %v, want s=0 (the committed stream time 1100 passed its end)", l.complete)
	}
	// Committing the same token again (a Recover after a crash in
	// Commit) is harmless.
	if err := next.Commit(committed); err != nil {
		t.Fatalf("commit again: %v", err)
	}

	// The old owner is fenced.
	write(t, s, "zombie", 1400)
	s.PrepareAt(1400)
	if _, _, err := s.Prepare(); !errors.Is(err, eddy.ErrSinkFenced) {
		t.Fatalf("the old owner's prepare: %v, want ErrSinkFenced", err)
	}
	if err := s.Abort(nil); err != nil {
		t.Fatal(err)
	}
	// An aborted prepared transaction's files are deleted.
	write(t, next, "five", 1500)
	tok := prepare(t, next, 1500)
	if err := next.Abort(tok); err != nil {
		t.Fatal(err)
	}
	if l := list(t, dir); fmt.Sprint(l.lines) != "map[s=0:[one] s=1:[two]]" || len(l.inProgress) != 0 {
		t.Fatalf("after aborts: %v", l)
	}
}

// TestSuccessWaitsForEveryTask: with two tasks writing, a partition is
// complete only once both tasks' stream times passed it; a task beyond
// Config.Tasks is refused.
func TestSuccessWaitsForEveryTask(t *testing.T) {
	dir := t.TempDir()
	cfg := secondPartitions(dir)
	cfg.Tasks = 2
	a, b := sinkOf(t, cfg, "0_0", nil), sinkOf(t, cfg, "0_1", nil)
	write(t, a, "a", 500)
	commit(t, a, 5000)
	if l := list(t, dir); len(l.complete) != 0 {
		t.Fatalf("complete %v with one task's time only", l.complete)
	}
	write(t, b, "b", 1500)
	commit(t, b, 2500)
	// The directory's time is 2500: s=0 and s=1 (written by b only) are
	// complete, not s=2.
	if l := list(t, dir); fmt.Sprint(l.complete) != "[s=0 s=1]" {
		t.Fatalf("%v, want s=0 and s=1 complete", l)
	}
	write(t, a, "late", 2100)
	commit(t, a, 6000)
	if l := list(t, dir); fmt.Sprint(l.complete) != "[s=0 s=1]" {
		t.Fatalf("%v: s=2 is complete before task 0_1 passed it", l)
	}
	commit(t, b, eddy.EndOfInputTime)
	if l := list(t, dir); fmt.Sprint(l.complete) != "[s=0 s=1 s=2]" {
		t.Fatalf("%v, want every partition complete", l)
	}

	cfg.Tasks = 1
	if err := cfg.check(eddy.SinkTask{AppID: "app", Sink: "files", Task: "0_1"}); err == nil || !strings.Contains(err.Error(), "Config.Tasks") {
		t.Errorf("task 0_1 with Tasks 1: %v, want an error naming Config.Tasks", err)
	}
}

// TestConfigErrors: a bad Config, and a directory another sink owns, are
// refused at open with errors that name the fix.
func TestConfigErrors(t *testing.T) {
	task := eddy.SinkTask{AppID: "app", Sink: "files", Task: "0_0"}
	for _, c := range []struct {
		cfg  Config[string, string]
		want string
	}{
		{Config[string, string]{Encode: secondPartitions("").Encode}, "Config.Dir"},
		{Config[string, string]{Dir: "x"}, "Config.Encode"},
		{Config[string, string]{Dir: "x", Encode: secondPartitions("").Encode, RollSize: -1}, "negative"},
	} {
		if err := c.cfg.check(task); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
	dir := t.TempDir()
	sinkOf(t, secondPartitions(dir), "0_0", nil)
	other := newSink(secondPartitions(dir), eddy.SinkTask{AppID: "other", Sink: "files", Task: "0_0"})
	if err := other.Recover(nil); err == nil || !strings.Contains(err.Error(), "own Config.Dir") {
		t.Errorf("another app's sink on the directory: %v", err)
	}
	s := sinkOf(t, Config[string, string]{Dir: t.TempDir(), Encode: secondPartitions("").Encode,
		Partition: func(dst []byte, _ eddy.Record[string, string]) []byte { return append(dst, "../out"...) }}, "0_0", nil)
	if err := s.Write(eddy.Record[string, string]{Value: "v"}); err == nil || !strings.Contains(err.Error(), "relative path") {
		t.Errorf("a partition outside the directory: %v", err)
	}
}

// TestDirectoriesSynced: every directory that gains an entry is synced
// before the entry is relied on — Dir's parents when Recover creates
// Dir and .eddy, Dir when a partition directory is made, the partition
// when a part file is renamed into it — so that a power loss cannot drop
// a committed file's name.
func TestDirectoriesSynced(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b")
	cfg := secondPartitions(dir)
	st := eddy.SinkTask{AppID: "app", Sink: "files", Task: "0_0"}
	if err := cfg.check(st); err != nil {
		t.Fatal(err)
	}
	s := newSink(cfg, st)
	synced := map[string]bool{}
	s.onSync = func(d string) { synced[d] = true }
	if err := s.Recover(nil); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{root, filepath.Join(root, "a"), dir, filepath.Join(dir, metaDir)} {
		if !synced[d] {
			t.Errorf("Recover did not sync %s, which gained an entry (synced: %v)", d, synced)
		}
	}
	clear(synced)
	write(t, s, "one", 100)
	commit(t, s, 100)
	for _, d := range []string{dir, filepath.Join(dir, "s=0")} {
		if !synced[d] {
			t.Errorf("the first commit into s=0 did not sync %s (synced: %v)", d, synced)
		}
	}
}

// TestCommitRefusesToReplace: a commit whose final name is taken (the
// sink's .eddy was deleted while its part files stayed, so epochs start
// again) fails and leaves the committed file as it was; a commit
// repeated after a crash between link and remove finishes.
func TestCommitRefusesToReplace(t *testing.T) {
	dir := t.TempDir()
	cfg := secondPartitions(dir)
	cfg.Tasks = 2
	s := sinkOf(t, cfg, "0_0", nil)
	write(t, s, "first", 100)
	commit(t, s, 100)
	if err := os.RemoveAll(filepath.Join(dir, metaDir)); err != nil {
		t.Fatal(err)
	}
	again := sinkOf(t, cfg, "0_0", nil)
	write(t, again, "second", 200)
	err := again.Commit(prepare(t, again, 200))
	if err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Fatalf("a commit onto a committed file's name: %v, want a refusal", err)
	}
	if l := list(t, dir); fmt.Sprint(l.lines) != "map[s=0:[first]]" {
		t.Fatalf("%v: the committed file was replaced", l)
	}

	// A crash after the link, before the remove: both names, one file.
	next := sinkOf(t, cfg, "0_1", nil)
	write(t, next, "third", 300)
	tok := prepare(t, next, 300)
	tk, err := decodeToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "s=0")
	if err := os.Link(filepath.Join(p, next.inProgressName(tk.epoch, 1)), filepath.Join(p, next.finalName(tk.epoch, 1))); err != nil {
		t.Fatal(err)
	}
	if err := next.Commit(tok); err != nil {
		t.Fatalf("finishing a linked commit: %v", err)
	}
	if l := list(t, dir); fmt.Sprint(l.lines) != "map[s=0:[first third]]" || len(l.inProgress) != 1 {
		t.Fatalf("%v, want first and third visible and only the refused commit's file in progress", l)
	}
}

// TestEpochClaimsAreExclusive: an owner that listed the claims before
// another claimed the next epoch (the race of two owners opening at
// once) takes the one after, and fences the other; of owners that open
// at once, exactly one holds the highest epoch, and only it passes
// Prepare.
func TestEpochClaimsAreExclusive(t *testing.T) {
	dir := t.TempDir()
	cfg := secondPartitions(dir)
	st := eddy.SinkTask{AppID: "app", Sink: "files", Task: "0_0"}
	if err := cfg.check(st); err != nil {
		t.Fatal(err)
	}
	first := sinkOf(t, cfg, "0_0", nil) // epoch 1
	late := newSink(cfg, st)
	e, err := late.claimAfter(0) // listed before first claimed 1
	if err != nil || e != 2 {
		t.Fatalf("a claim after a stale listing: epoch %d (%v), want 2: epoch 1 is first's", e, err)
	}
	late.epoch = e
	for _, s := range []*sink[string, string]{first, late} {
		s.PrepareAt(100)
		if _, _, err := s.Prepare(); (err == nil) != (s == late) {
			t.Errorf("the owner of epoch %d: Prepare %v; want only epoch 2's to pass", s.epoch, err)
		}
	}

	const owners = 16
	sinks := make([]*sink[string, string], owners)
	errs := make([]error, owners)
	var wg sync.WaitGroup
	for i := range sinks {
		sinks[i] = newSink(cfg, st)
		wg.Go(func() { errs[i] = sinks[i].Recover(nil) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var high int64
	holders := 0
	for _, s := range sinks {
		switch {
		case s.epoch > high:
			high, holders = s.epoch, 1
		case s.epoch == high:
			holders++
		}
	}
	if holders != 1 {
		t.Errorf("%d owners hold the highest epoch %d, want 1", holders, high)
	}
	passed := 0
	for _, s := range sinks {
		s.PrepareAt(100) // stream time moved: Prepare checks the epoch
		if _, _, err := s.Prepare(); err == nil {
			passed++
			if s.epoch != high {
				t.Errorf("the owner of epoch %d passed Prepare, not that of %d", s.epoch, high)
			}
		} else if !errors.Is(err, eddy.ErrSinkFenced) {
			t.Fatal(err)
		}
	}
	if passed != 1 {
		t.Errorf("%d owners passed Prepare, want only the newest", passed)
	}
}

// TestStaleTaskTimes: after the input lost partitions (Tasks 2 → 1) or
// the sink moved to another sub-topology, the time files of tasks that no
// longer exist neither fail the sink nor hold its partitions back.
func TestStaleTaskTimes(t *testing.T) {
	dir := t.TempDir()
	cfg := secondPartitions(dir)
	cfg.Tasks = 2
	for _, task := range []string{"0_0", "0_1"} {
		s := sinkOf(t, cfg, task, nil)
		write(t, s, "old-"+task, 100)
		commit(t, s, 500)
	}
	cfg.Tasks = 1
	s := sinkOf(t, cfg, "0_0", nil)
	write(t, s, "new", 1100)
	if err := s.Commit(prepare(t, s, 2500)); err != nil {
		t.Fatalf("with a stale time file of task 0_1: %v", err)
	}
	if l := list(t, dir); fmt.Sprint(l.complete) != "[s=0 s=1]" {
		t.Fatalf("%v, want s=0 and s=1 complete from task 0_0 alone", l)
	}

	// The topology changed: the sink's task is 1_0 now; 0_0's time is
	// stale.
	moved := sinkOf(t, cfg, "1_0", nil)
	write(t, moved, "moved", 2100)
	commit(t, moved, 3500)
	if l := list(t, dir); fmt.Sprint(l.complete) != "[s=0 s=1 s=2]" {
		t.Fatalf("%v, want s=2 complete from task 1_0 alone", l)
	}
}

// TestIdleTask: a task that never commits a stream time holds every
// partition back; with Config.IdleTimeout, once its time file is older
// than that, it no longer does, and once it commits again it holds back
// again.
func TestIdleTask(t *testing.T) {
	dir := t.TempDir()
	cfg := secondPartitions(dir)
	cfg.Tasks = 2
	cfg.IdleTimeout = time.Hour
	busy, idle := sinkOf(t, cfg, "0_0", nil), sinkOf(t, cfg, "0_1", nil)
	write(t, busy, "a", 500)
	commit(t, busy, 2500)
	if l := list(t, dir); len(l.complete) != 0 {
		t.Fatalf("%v: complete while task 0_1 opened less than IdleTimeout ago", l)
	}
	// An hour passes without task 0_1 writing its time file.
	hourAgo := time.Now().Add(-cfg.IdleTimeout)
	if err := os.Chtimes(filepath.Join(dir, metaDir, "0_1.time"), hourAgo, hourAgo); err != nil {
		t.Fatal(err)
	}
	write(t, busy, "b", 2600)
	commit(t, busy, 3000)
	if l := list(t, dir); fmt.Sprint(l.complete) != "[s=0 s=2]" {
		t.Fatalf("%v, want s=0 and s=2 complete with task 0_1 idle", l)
	}
	// Task 0_1 wakes up behind: it holds the directory back again.
	write(t, idle, "late", 1500)
	commit(t, idle, 1500)
	write(t, busy, "c", 4000)
	commit(t, busy, 5000)
	if l := list(t, dir); fmt.Sprint(l.complete) != "[s=0 s=2]" {
		t.Fatalf("%v, want s=1 and s=4 held back by task 0_1 at 1500", l)
	}
}
