package runtime

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/checkpoint"
	"github.com/eddy-streams/eddy/internal/harness/versitygw"
	"github.com/eddy-streams/eddy/internal/testutil"
)

func dirStore(t *testing.T) checkpoint.Store {
	s, err := checkpoint.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func s3Store(t *testing.T) checkpoint.Store {
	srv := versitygw.ForTest(t, "eddy-runtime")
	s, err := checkpoint.NewS3(srv.Options("eddy-runtime", "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// manifests returns the manifests of task 0_p of app "count", newest first.
func manifests(t *testing.T, s checkpoint.Store, p int) []*checkpoint.Manifest {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := checkpoint.TaskPrefix("count", fmt.Sprintf("0_%d", p))
	keys, err := checkpoint.ListManifests(ctx, s, prefix)
	if err != nil {
		t.Fatal(err)
	}
	var ms []*checkpoint.Manifest
	for _, k := range keys {
		m, err := checkpoint.ReadManifest(ctx, s, k)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	return ms
}

// withCheckpoints returns cfg checkpointing to s, only at a clean stop.
func withCheckpoints(cfg Config, s checkpoint.Store) Config {
	cfg.Checkpoints, cfg.CheckpointInterval, cfg.CheckpointKeep = s, 0, 3
	return cfg
}

// runUntil runs the counting topology with cfg, produces n records from
// from, waits for all outputs so far and stops cleanly.
func (h *harness) runUntil(cfg Config, from, n int) {
	h.t.Helper()
	stop := h.run(cfg)
	h.produce(from, n)
	h.waitOutputs(from + n)
	stop()
}

func wipe(t *testing.T, cfg Config) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(cfg.StateDir, cfg.AppID)); err != nil {
		t.Fatal(err)
	}
}

// checkRestored runs once more after the damage, produces 30 more records
// and checks that the outputs are exactly a sequential run's.
func (h *harness) checkRestored(cfg Config, from int) {
	h.t.Helper()
	stop := h.run(cfg)
	h.produce(from, 30)
	outs := h.waitOutputs(from + 30)
	stop()
	if e := check(outs, from+30); !e.ok() {
		h.t.Fatalf("after the restore: %+v", e)
	}
}

// TestCheckpointRestoreAfterWipe is the fresh machine of docs/design.md §4: the
// state directory is gone, the task downloads its newest checkpoint and
// replays only the changelog written after it (the tail), and the counts
// go on exactly.
func TestCheckpointRestoreAfterWipe(t *testing.T) {
	for name, newStore := range map[string]func(*testing.T) checkpoint.Store{"dir": dirStore, "s3": s3Store} {
		t.Run(name, func(t *testing.T) {
			store := newStore(t)
			h := newHarness(t)
			var log testutil.LogBuffer
			plain := h.config(t.TempDir(), &log)
			cfg := withCheckpoints(plain, store)
			h.runUntil(cfg, 0, 100)
			for p := 0; p < 2; p++ {
				if ms := manifests(t, store, p); len(ms) != 1 || ms[0].Offsets.Changelog["counts"] == 0 {
					t.Fatalf("task 0_%d: %d checkpoints after a clean stop; want 1 with state", p, len(ms))
				}
			}
			h.runUntil(plain, 100, 50) // the tail: not in the checkpoint
			wipe(t, cfg)
			h.checkRestored(cfg, 150)
			logs := log.String()
			if os.Getenv("EDDY_DEBUG_LOGS") != "" {
				t.Log(logs)
			}
			if n := restoredFrom(logs, "checkpoint"); n != 2 {
				t.Fatalf("%d restores from a checkpoint logged; want one per task:\n%s", n, logs)
			}
			// The state directory was gone: both downloads started
			// before the first task opened.
			if n := strings.Count(logs, "prefetched=true"); n != 2 {
				t.Fatalf("%d restores used a prefetched checkpoint; want both:\n%s", n, logs)
			}
			// The tail's replay started at the checkpoint: it replayed
			// fewer records than a full restore would have.
			tail := replayed(logs)
			if tail == 0 || tail >= 150 {
				t.Fatalf("the restores replayed %d changelog records; want the tail only (> 0, < 150):\n%s", tail, logs)
			}
		})
	}
}

// restoredFrom counts the tasks' restores from source ("checkpoint",
// "changelog") in the logs.
func restoredFrom(logs, source string) int {
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `msg="restored state"`) && strings.Contains(line, " source="+source+" ") {
			n++
		}
	}
	return n
}

// replayed sums the records= of the log's restores from the changelog.
func replayed(logs string) int {
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `msg="restored state"`) || !strings.Contains(line, " source=changelog ") {
			continue
		}
		var r int
		if i := strings.Index(line, " records="); i >= 0 {
			fmt.Sscanf(line[i+len(" records="):], "%d", &r)
		}
		n += r
	}
	return n
}

// TestPeriodicCheckpoints: while the app runs, each task is checkpointed
// every interval once its state moved, and not when it did not.
func TestPeriodicCheckpoints(t *testing.T) {
	store := dirStore(t)
	h := newHarness(t)
	cfg := withCheckpoints(h.config(t.TempDir(), io.Discard), store)
	cfg.CheckpointInterval = 100 * time.Millisecond
	stop := h.run(cfg)
	defer stop()
	h.produce(0, 100)
	h.waitOutputs(100)
	// waitFor waits until both tasks have a checkpoint that reflects input
	// offsets summing to n.
	waitFor := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var sum int64
			for p := 0; p < 2; p++ {
				if ms := manifests(t, store, p); len(ms) > 0 {
					for _, in := range ms[0].Offsets.Input {
						sum += in.Offset
					}
				}
			}
			if sum == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("checkpoints reflect %d inputs, want %d", sum, n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor(100)
	seqs := func() [2]int64 {
		return [2]int64{manifests(t, store, 0)[0].Seq, manifests(t, store, 1)[0].Seq}
	}
	before := seqs()
	time.Sleep(500 * time.Millisecond) // five intervals without input
	if after := seqs(); after != before {
		t.Fatalf("checkpoints %v became %v with no input; an unchanged state must not be checkpointed", before, after)
	}
	h.produce(100, 20)
	waitFor(120)
}

// TestCheckpointCorruption: a checkpoint whose file was damaged or deleted
// in the store, or whose offsets are past its changelog's end, is skipped
// for the previous one; with none usable the task restores from the
// changelog alone; a local database found corrupt is rebuilt from the
// checkpoint. The counts are exact in every case.
func TestCheckpointCorruption(t *testing.T) {
	// newestTable returns the key of the largest file of task 0_p's newest
	// checkpoint.
	newestTable := func(t *testing.T, s checkpoint.Store, p int) string {
		m := manifests(t, s, p)[0]
		var big checkpoint.File
		for _, f := range m.Files {
			if f.Size > big.Size {
				big = f
			}
		}
		return checkpoint.TaskPrefix("count", fmt.Sprintf("0_%d", p)) + big.Key
	}
	ctx := context.Background()
	tests := []struct {
		name string
		// damage runs with the app stopped after two checkpoints and a
		// tail; wipe says whether the state directory goes too.
		damage   func(t *testing.T, s checkpoint.Store, cfg Config)
		wipe     bool
		wantLogs []string
		// fromCheckpoint is how many tasks restore from a checkpoint.
		fromCheckpoint int
	}{
		{
			name: "file damaged in the store",
			damage: func(t *testing.T, s checkpoint.Store, cfg Config) {
				for p := 0; p < 2; p++ {
					key := newestTable(t, s, p)
					r, err := s.Get(ctx, key)
					if err != nil {
						t.Fatal(err)
					}
					b, _ := io.ReadAll(r)
					r.Close()
					b[len(b)/2] ^= 0xff
					if err := s.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
						t.Fatal(err)
					}
				}
			},
			wipe:           true,
			wantLogs:       []string{"checkpoint not usable", "SHA-256", "00000000000000000000.json"},
			fromCheckpoint: 2,
		},
		{
			name: "file deleted from the store",
			damage: func(t *testing.T, s checkpoint.Store, cfg Config) {
				for p := 0; p < 2; p++ {
					if err := s.Delete(ctx, newestTable(t, s, p)); err != nil {
						t.Fatal(err)
					}
				}
			},
			wipe:           true,
			wantLogs:       []string{"checkpoint not usable", "missing from the store"},
			fromCheckpoint: 2,
		},
		{
			// The files match the manifest, the database they make does
			// not: found only once it is open, after the download.
			name: "manifest offsets not those of its database",
			damage: func(t *testing.T, s checkpoint.Store, cfg Config) {
				for p := 0; p < 2; p++ {
					m := manifests(t, s, p)[0]
					m.Offsets.Changelog["counts"]--
					b, _ := m.Encode()
					key := checkpoint.TaskPrefix("count", fmt.Sprintf("0_%d", p)) + fmt.Sprintf("manifests/%020d.json", m.Seq)
					if err := s.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
						t.Fatal(err)
					}
				}
			},
			wipe:           true,
			wantLogs:       []string{"its manifest says", "checkpoint=count/0_0/manifests/00000000000000000000.json"},
			fromCheckpoint: 2,
		},
		{
			name: "checkpoints ahead of the changelog",
			damage: func(t *testing.T, s checkpoint.Store, cfg Config) {
				for p := 0; p < 2; p++ {
					for _, m := range manifests(t, s, p) {
						m.Offsets.Changelog["counts"] += 1000
						b, _ := m.Encode()
						key := checkpoint.TaskPrefix("count", fmt.Sprintf("0_%d", p)) + fmt.Sprintf("manifests/%020d.json", m.Seq)
						if err := s.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
							t.Fatal(err)
						}
					}
				}
			},
			wipe:     true,
			wantLogs: []string{"ahead of the changelog", "no usable checkpoint; restoring from the changelog alone"},
		},
		{
			name: "every checkpoint damaged",
			damage: func(t *testing.T, s checkpoint.Store, cfg Config) {
				for p := 0; p < 2; p++ {
					for _, m := range manifests(t, s, p) {
						for _, f := range m.Files {
							if f.Key != "" {
								s.Delete(ctx, checkpoint.TaskPrefix("count", fmt.Sprintf("0_%d", p))+f.Key)
							}
						}
					}
				}
			},
			wipe:     true,
			wantLogs: []string{"no usable checkpoint; restoring from the changelog alone"},
		},
		{
			name: "local database corrupt",
			damage: func(t *testing.T, s checkpoint.Store, cfg Config) {
				for p := 0; p < 2; p++ {
					dir := filepath.Join(cfg.StateDir, cfg.AppID, fmt.Sprintf("0_%d", p))
					ms, _ := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
					if len(ms) == 0 {
						t.Fatalf("no MANIFEST in %s", dir)
					}
					for _, m := range ms {
						if err := os.WriteFile(m, []byte("garbage, not a manifest"), 0o600); err != nil {
							t.Fatal(err)
						}
					}
				}
			},
			wantLogs:       []string{"local state is corrupt"},
			fromCheckpoint: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := dirStore(t)
			h := newHarness(t)
			var log testutil.LogBuffer
			plain := h.config(t.TempDir(), &log)
			cfg := withCheckpoints(plain, store)
			h.runUntil(cfg, 0, 60)     // checkpoint 0
			h.runUntil(cfg, 60, 60)    // checkpoint 1
			h.runUntil(plain, 120, 30) // a tail
			tt.damage(t, store, cfg)
			if tt.wipe {
				wipe(t, cfg)
			}
			h.checkRestored(cfg, 150)
			logs := log.String()
			for _, want := range tt.wantLogs {
				if !strings.Contains(logs, want) {
					t.Errorf("the logs do not say %q:\n%s", want, logs)
				}
			}
			if n := restoredFrom(logs, "checkpoint"); n != tt.fromCheckpoint {
				t.Errorf("%d tasks restored from a checkpoint, want %d:\n%s", n, tt.fromCheckpoint, logs)
			}
		})
	}
}

// TestCheckpointUsable: what makes a checkpoint unusable before anything
// is downloaded.
func TestCheckpointUsable(t *testing.T) {
	sub := &subPlan{storeNames: []string{"a", "b"}, storeIndex: map[string]int{"a": 0, "b": 1}}
	ends := map[string]int64{"a": 100, "b": 50}
	for _, tt := range []struct {
		name      string
		changelog map[string]int64
		want      string // "" for usable
	}{
		{"at the ends", map[string]int64{"a": 100, "b": 50}, ""},
		{"behind", map[string]int64{"a": 10, "b": 0}, ""},
		{"a store with nothing restored", map[string]int64{"a": 10}, ""},
		{"ahead of a changelog", map[string]int64{"a": 10, "b": 51}, "ahead of the changelog"},
		{"a store the task lacks", map[string]int64{"a": 10, "c": 1}, "topology changed"},
	} {
		m := &checkpoint.Manifest{Offsets: checkpoint.Offsets{Changelog: tt.changelog}}
		err := usable(m, sub, ends)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v; want usable", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v; want an error saying %q", tt.name, err, tt.want)
		}
	}
}
