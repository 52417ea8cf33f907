package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/testutil"
	"github.com/eddy-streams/eddy/state"
)

// TestDamagedStateIsRebuilt damages the task databases on disk between two
// runs — flipped bytes in every table file, or table files removed — and
// checks that the tasks discard them, rebuild from the changelog, and
// carry on with exact outputs (docs/design.md §4, "Corruption").
func TestDamagedStateIsRebuilt(t *testing.T) {
	for _, damage := range []struct {
		name string
		fn   func(t *testing.T, path string)
	}{
		{"flipped bytes", func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for i := len(b) / 4; i < len(b)/2; i++ {
				b[i] ^= 0xff
			}
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"missing file", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(damage.name, func(t *testing.T) {
			h := newHarness(t)
			dir := t.TempDir()
			var log testutil.LogBuffer
			cfg := h.config(dir, &log)
			stop := h.run(cfg)
			h.produce(0, 200)
			h.waitOutputs(200)
			stop()
			// A stop leaves recent data in the write-ahead log, whose
			// damaged tail Pebble drops as a torn write (a consistent,
			// older state: restore replays the rest). Flush it into
			// table files, immutable and checksummed, and damage those.
			tasks, err := filepath.Glob(filepath.Join(dir, "count", "*"))
			if err != nil || len(tasks) == 0 {
				t.Fatalf("no task directories: %v", err)
			}
			for _, td := range tasks {
				db, err := cpebble.Open(td, &cpebble.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			}
			var damaged int
			err = filepath.Walk(filepath.Join(dir, "count"), func(path string, info os.FileInfo, err error) error {
				if err != nil {
					return err
				}
				if strings.HasSuffix(filepath.Base(path), ".sst") {
					if info.Size() > 0 {
						damage.fn(t, path)
						damaged++
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if damaged == 0 {
				t.Fatal("no database file to damage")
			}
			stop = h.run(cfg)
			h.produce(200, 100)
			outs := h.waitOutputs(300)
			stop()
			if e := check(outs, 300); !e.ok() {
				t.Fatalf("after damaging %d files: %+v\n%s", damaged, e, log.String())
			}
			t.Logf("rebuild: %s", firstLine(log.String(), "rebuilding"))
			if !strings.Contains(log.String(), "rebuilding") {
				t.Errorf("no rebuild was logged after damaging %d files:\n%s", damaged, log.String())
			}
		})
	}
}

// firstLine returns the first line of s that contains sub.
func firstLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// corruptOnce wraps a backend: once armed, the next Get of any of its
// databases reports corruption, as Pebble does when a read meets a damaged
// block that opening the database did not touch.
type corruptOnce struct {
	state.Backend
	armed atomic.Bool
}

func (b *corruptOnce) Open(dir string) (state.DB, error) {
	db, err := b.Backend.Open(dir)
	if err != nil {
		return nil, err
	}
	return corruptOnceDB{DB: db, b: b}, nil
}

type corruptOnceDB struct {
	state.DB
	b *corruptOnce
}

func (d corruptOnceDB) Get(store string, key []byte) ([]byte, bool, error) {
	if d.b.armed.CompareAndSwap(true, false) {
		return nil, false, fmt.Errorf("test: block checksum mismatch: %w", state.ErrCorrupt)
	}
	return d.DB.Get(store, key)
}

// TestCorruptionFoundWhileProcessing: a read that finds the database
// corrupt aborts the transaction, discards the database and rebuilds it
// from the changelog; the outputs stay exact.
func TestCorruptionFoundWhileProcessing(t *testing.T) {
	h := newHarness(t)
	var log testutil.LogBuffer
	cfg := h.config(t.TempDir(), &log)
	backend := &corruptOnce{Backend: cfg.Backend}
	cfg.Backend = backend
	stop := h.run(cfg)
	h.produce(0, 100)
	h.waitOutputs(100)
	// The write buffer knows a store that was empty when the task
	// started whole, and reads nothing of it from the database: restart
	// so the store holds keys, then read keys the buffer has not seen.
	stop()
	stop = h.run(cfg)
	defer stop()
	backend.armed.Store(true)
	cl := h.client(kgo.DefaultProduceTopic("in"))
	defer cl.Close()
	var recs []*kgo.Record
	for i := 0; i < 20; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("new%d", i)), Value: []byte("v")})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	outs := h.waitOutputs(120)
	if backend.armed.Load() {
		t.Fatal("the fault never fired")
	}
	// The first 100 outputs follow the counting reference; each new key
	// was counted once: "1:v", and only once.
	var old []*kgo.Record
	seen := map[string]int{}
	for _, r := range outs {
		if strings.HasPrefix(string(r.Key), "new") {
			seen[string(r.Key)]++
			if string(r.Value) != "1:v" {
				t.Errorf("output %s=%s, want 1:v", r.Key, r.Value)
			}
		} else {
			old = append(old, r)
		}
	}
	if e := check(old, 100); !e.ok() {
		t.Errorf("outputs of the first 100 records: %+v", e)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s has %d outputs, want 1", k, n)
		}
	}
	if len(seen) != 20 {
		t.Errorf("%d of the 20 new keys have an output", len(seen))
	}
	for _, want := range []string{"local state is corrupt; discarding it", "restored state"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
}
