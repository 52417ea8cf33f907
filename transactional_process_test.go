package eddy_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
)

// fileSink is a TransactionalSink over a directory of files, the smallest
// real system outside Kafka with the two phases: a transaction's lines
// are prepared as <epoch>-<seq>.prepared (written, synced, renamed into
// place), committed by renaming it to .committed, aborted by removing
// it. The task's epoch file fences older owners: Recover raises it, and a
// Prepare whose epoch is no longer the file's fails. Its "constraint",
// checked at Prepare as a database checks a row's, refuses a value that
// starts with "refused:".
type fileSink struct {
	dir        string
	epoch, seq int64
	lines      []string // one per Write since the last Prepare or Abort
}

func openFileSink(root string) func(eddy.SinkTask) (eddy.TransactionalSink[string, string], error) {
	return func(task eddy.SinkTask) (eddy.TransactionalSink[string, string], error) {
		dir := filepath.Join(root, task.AppID, task.Task)
		return &fileSink{dir: dir}, os.MkdirAll(dir, 0o755)
	}
}

func (s *fileSink) Recover(committed []byte) error {
	old, err := s.readEpoch()
	if err != nil {
		return err
	}
	s.epoch = old + 1
	if err := writeSynced(filepath.Join(s.dir, "epoch"), []byte(strconv.FormatInt(s.epoch, 10))); err != nil {
		return err
	}
	prepared, err := filepath.Glob(filepath.Join(s.dir, "*.prepared"))
	if err != nil {
		return err
	}
	for _, p := range prepared {
		if committed != nil && filepath.Base(p) == string(committed)+".prepared" {
			if err := s.Commit(committed); err != nil {
				return err
			}
			continue
		}
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	return nil
}

func (s *fileSink) readEpoch() (int64, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, "epoch"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(string(b), 10, 64)
}

func (s *fileSink) Write(r eddy.Record[string, string]) error {
	if strings.Contains(r.Key+r.Value, "\n") {
		return errors.New("a line break cannot be written")
	}
	s.lines = append(s.lines, r.Key+"="+r.Value+"\n")
	return nil
}

func (s *fileSink) Prepare() ([]byte, []eddy.Refusal, error) {
	if len(s.lines) == 0 {
		return nil, nil, nil
	}
	if _, err := os.Stat(s.dir); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", eddy.ErrSinkUnavailable, err)
	}
	e, err := s.readEpoch()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", eddy.ErrSinkUnavailable, err)
	}
	if e != s.epoch {
		return nil, nil, fmt.Errorf("%w (epoch %d, ours %d)", eddy.ErrSinkFenced, e, s.epoch)
	}
	var data []byte
	var refused []eddy.Refusal
	for i, l := range s.lines {
		if _, v, _ := strings.Cut(l, "="); strings.HasPrefix(v, "refused:") {
			refused = append(refused, eddy.Refusal{Write: i, Err: errors.New("the value breaks the sink's constraint")})
			continue
		}
		data = append(data, l...)
	}
	s.seq++
	token := fmt.Sprintf("%d-%d", s.epoch, s.seq)
	if err := writeSynced(filepath.Join(s.dir, token+".prepared"), data); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", eddy.ErrSinkUnavailable, err)
	}
	s.lines = s.lines[:0]
	return []byte(token), refused, nil
}

func (s *fileSink) Commit(token []byte) error {
	err := os.Rename(filepath.Join(s.dir, string(token)+".prepared"), filepath.Join(s.dir, string(token)+".committed"))
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat(filepath.Join(s.dir, string(token)+".committed")); serr == nil {
			return nil // committed already
		}
	}
	return err
}

func (s *fileSink) Abort(token []byte) error {
	s.lines = s.lines[:0]
	if token == nil {
		return nil
	}
	err := os.Remove(filepath.Join(s.dir, string(token)+".prepared"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func (s *fileSink) Close() error { return nil }

// writeSynced writes data to path atomically: a synced temporary file
// renamed into place.
func writeSynced(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

const (
	transactionalSinkDirEnv = "EDDY_TEST_SINK_DIR"
	transactionalRecords    = 20_000
)

func transactionalTopology() *eddy.Topology {
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "tx-in", serde.String(), serde.String())
	eddy.ToTransactional(in, "files", openFileSink(os.Getenv(transactionalSinkDirEnv)))
	return topo
}

// TestTransactionalChild is the app of TestTransactionalSinkThroughKills,
// run in a child process. Run alone it skips.
func TestTransactionalChild(t *testing.T) {
	childApp(t, "transactional", transactionalTopology, 500)
}

// TestTransactionalSinkThroughKills is ToTransactional's process test:
// the app is SIGKILLed in each window of the two phases (after the sink
// prepared and before the Kafka transaction committed; after it committed
// and before the sink committed; and around them), then runs to the end:
// the sink's committed files hold every record exactly once, and no
// prepared transaction is left.
func TestTransactionalSinkThroughKills(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the app as a process five times")
	}
	sinkDir := t.TempDir()
	t.Setenv(transactionalSinkDirEnv, sinkDir)
	addr := startBroker(t)
	createTopics(t, addr, 2, "tx-in")
	var recs []*kgo.Record
	for i := range transactionalRecords {
		recs = append(recs, srec(fmt.Sprint("k", i%97), fmt.Sprint("v", i)))
	}
	produce(t, addr, "tx-in", recs...)
	runKilledThenLive(t, "TestTransactionalChild", []string{
		"commit.before-end@7", "commit.after-end@7", "commit.after-apply@7", "commit.before-changelog@7",
	}, addr)

	deadline := time.Now().Add(hangGuard)
	for {
		seen, prepared := readFileSink(t, sinkDir)
		n, dups := 0, 0
		for _, c := range seen {
			n += c
			if c > 1 {
				dups++
			}
		}
		if dups > 0 {
			t.Fatalf("%d records committed more than once", dups)
		}
		if n == transactionalRecords && prepared == 0 {
			t.Logf("%d records committed once each, in the sink's committed files; no prepared transaction left", n)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records committed, %d prepared transactions left, after %v", n, transactionalRecords, prepared, hangGuard)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readFileSink counts each record's lines in the committed files under
// dir, and the prepared files.
func readFileSink(t *testing.T, dir string) (seen map[string]int, prepared int) {
	t.Helper()
	seen = map[string]int{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch {
		case strings.HasSuffix(path, ".prepared"):
			prepared++
		case strings.HasSuffix(path, ".committed"):
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				seen[sc.Text()]++
			}
			return sc.Err()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return seen, prepared
}
