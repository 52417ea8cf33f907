package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/checkpoint"
)

// fetched is a task's checkpoint downloaded and checked, not yet installed.
type fetched struct {
	index int // in the task's manifest keys, newest first
	key   string
	m     *checkpoint.Manifest
	st    checkpoint.DownloadStats
}

// found is what looking for a task's checkpoint gave: the manifests, the
// changelog ends they were checked against, and the newest usable one,
// downloaded into the task's restore directory (nil if none is usable).
type found struct {
	keys []string
	ends map[string]int64
	f    *fetched
}

// prefetch is a look-up started before its task opens.
type prefetch struct {
	done chan struct{}
	res  found
	err  error
}

// prefetchTasks is how many tasks' checkpoints download at once.
const prefetchTasks = 4

// prefetch starts, for each of ids without a local database (a new machine,
// a wiped directory), the look-up and download of its newest usable
// checkpoint, all at once, so that the tasks' restores, which the worker
// runs one after another, find their files there: what a restore from a
// remote store waits for is mostly round trips, which overlap. The returned
// function cancels what is still running, waits for it and removes the
// downloads no restore took; call it once the tasks are open.
func (c *checkpoints) prefetch(ctx context.Context, w *worker, ids []TaskID) (wait func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	sem := make(chan struct{}, prefetchTasks)
	var started []TaskID
	for _, id := range ids {
		sub := &w.plan.subs[id.Subtopology]
		dir := filepath.Join(w.cfg.StateDir, w.cfg.AppID, id.String())
		if len(sub.storeNames) == 0 || !emptyDir(dir) {
			continue
		}
		c.task(id) // its first-sight cleanup must not remove the download
		p := &prefetch{done: make(chan struct{})}
		c.mu.Lock()
		c.prefetched[id] = p
		c.mu.Unlock()
		started = append(started, id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(p.done)
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				p.err = ctx.Err()
				return
			}
			log := w.log.With("task", id.String())
			p.res, p.err = c.find(ctx, log, w.cl, sub, id)
		}()
	}
	return func() {
		cancel()
		wg.Wait()
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, id := range started {
			if c.prefetched[id] != nil {
				delete(c.prefetched, id)
				os.RemoveAll(c.restoreDir(id))
			}
		}
	}
}

func emptyDir(dir string) bool {
	entries, err := os.ReadDir(dir)
	return errors.Is(err, os.ErrNotExist) || err == nil && len(entries) == 0
}

func (c *checkpoints) restoreDir(id TaskID) string {
	return filepath.Join(c.dir, id.String(), "restore")
}

// find lists id's checkpoints and fetches the newest usable one.
func (c *checkpoints) find(ctx context.Context, log *slog.Logger, cl *kgo.Client, sub *subPlan, id TaskID) (found, error) {
	prefix := checkpoint.TaskPrefix(c.appID, id.String())
	keys, err := checkpoint.ListManifests(ctx, c.store, prefix)
	if err != nil {
		if ctx.Err() != nil {
			return found{}, ctx.Err()
		}
		log.Warn("cannot list checkpoints; restoring from the changelog alone", "err", err)
		return found{}, nil
	}
	if len(keys) == 0 {
		log.Info("no checkpoint in the store; restoring from the changelog alone")
		return found{}, nil
	}
	ends, err := changelogEnds(ctx, cl, sub, id.Partition)
	if err != nil {
		return found{}, err
	}
	res := found{keys: keys, ends: ends}
	res.f, err = c.fetch(ctx, log, sub, id, keys, 0, ends)
	return res, err
}

// fetch downloads the newest usable checkpoint among keys[from:] into the
// task's restore directory, logging each one it skips; nil if none is
// usable. A checkpoint is usable if it is of the task's stores, no offset
// of it is past its changelog's end (a changelog recreated since would not
// continue it: errStateAhead's case) and its files match their manifest.
func (c *checkpoints) fetch(ctx context.Context, log *slog.Logger, sub *subPlan, id TaskID, keys []string, from int, ends map[string]int64) (*fetched, error) {
	prefix := checkpoint.TaskPrefix(c.appID, id.String())
	tmp := c.restoreDir(id)
	for i := from; i < len(keys); i++ {
		m, err := checkpoint.ReadManifest(ctx, c.store, keys[i])
		if err == nil {
			err = usable(m, sub, ends)
		}
		var st checkpoint.DownloadStats
		if err == nil {
			os.RemoveAll(tmp)
			if err = os.MkdirAll(filepath.Dir(tmp), 0o700); err == nil {
				st, err = checkpoint.Download(ctx, c.store, prefix, m, tmp)
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			log.Warn("checkpoint not usable; trying an older one", "checkpoint", keys[i], "err", err)
			continue
		}
		return &fetched{index: i, key: keys[i], m: m, st: st}, nil
	}
	log.Warn("no usable checkpoint; restoring from the changelog alone", "checkpoints", len(keys))
	return nil, nil
}

// restore replaces t's empty database with the newest usable checkpoint,
// if there is one, and reports whether it did: the one prefetched, or one
// it looks up now. A checkpoint whose database does not open with the
// offsets its manifest records is skipped for the next older one; with
// none left the task restores from the changelog alone. Only a cancelled
// context or a failure to put an empty database back is an error.
func (c *checkpoints) restore(ctx context.Context, t *task, cl *kgo.Client) (bool, error) {
	start := time.Now()
	tc := c.task(t.id) // before anything lands in its working directory
	c.mu.Lock()
	p := c.prefetched[t.id]
	delete(c.prefetched, t.id)
	c.mu.Unlock()
	var res found
	var err error
	if p != nil {
		select {
		case <-p.done:
			res, err = p.res, p.err
		case <-ctx.Done():
			return false, ctx.Err()
		}
	} else {
		res, err = c.find(ctx, t.log, cl, t.sub, t.id)
	}
	if err != nil {
		return false, err
	}
	for f := res.f; f != nil; {
		openStart := time.Now()
		err := c.install(t, c.restoreDir(t.id), f.m)
		openTook := time.Since(openStart)
		if err == nil {
			took := time.Since(start)
			t.log.Info("restored state", "source", "checkpoint", "checkpoint", f.key, "files", f.st.Files, "bytes", f.st.Bytes,
				"download_took", f.st.Took.Round(time.Millisecond), "open_took", openTook.Round(time.Millisecond), "took", took.Round(time.Millisecond),
				"mb_per_s", fmt.Sprintf("%.1f", float64(f.st.Bytes)/1e6/took.Seconds()),
				"changelog_offsets", fmt.Sprint(t.committed.Changelog), "prefetched", p != nil && f == res.f)
			c.mu.Lock()
			tc.uploaded = t.committed.Clone() // the store has this state
			c.mu.Unlock()
			return true, nil
		}
		t.log.Warn("checkpoint not usable; trying an older one", "checkpoint", f.key, "err", err)
		if t.db == nil {
			// install failed after closing the empty database.
			if err := t.openDB(); err != nil {
				return false, err
			}
		}
		if f, err = c.fetch(ctx, t.log, t.sub, t.id, res.keys, f.index+1, res.ends); err != nil {
			return false, err
		}
	}
	return false, nil
}

// install moves the downloaded database in tmp to t's directory and opens
// it; on failure t's directory is left empty and t.db nil or empty.
func (c *checkpoints) install(t *task, tmp string, m *checkpoint.Manifest) error {
	if err := t.db.Close(); err != nil {
		return fmt.Errorf("close the empty database: %w", err)
	}
	t.db = nil
	if err := c.backend.Destroy(t.dir); err != nil {
		return err
	}
	if err := os.Rename(tmp, t.dir); err != nil {
		return fmt.Errorf("move the checkpoint into place: %w", err)
	}
	db, err := c.backend.Open(t.dir)
	if err != nil {
		return errors.Join(err, c.backend.Destroy(t.dir))
	}
	offsets, err := db.Offsets()
	if err == nil && !checkpoint.Equal(offsets, m.Offsets.State()) {
		err = fmt.Errorf("%w: its database holds offsets %v, its manifest says %v", checkpoint.ErrDamaged, offsets, m.Offsets.State())
	}
	if err != nil {
		db.Close()
		return errors.Join(err, c.backend.Destroy(t.dir))
	}
	t.db, t.committed = db, offsets
	return nil
}

// usable checks a manifest against the task before anything is downloaded:
// a store the task does not have means the topology changed; a store the
// manifest lacks had nothing restored (offset 0: its changelog is replayed
// whole).
func usable(m *checkpoint.Manifest, sub *subPlan, ends map[string]int64) error {
	for store := range m.Offsets.Changelog {
		if _, ok := sub.storeIndex[store]; !ok {
			return fmt.Errorf("it holds store %q, which the task does not have (the topology changed?); its stores: %v", store, sub.storeNames)
		}
	}
	for _, store := range sub.storeNames {
		if off := m.Offsets.Changelog[store]; off > ends[store] {
			return fmt.Errorf("%w: store %s at offset %d, its changelog ends at %d", errStateAhead, store, off, ends[store])
		}
	}
	return nil
}

// changelogEnds returns, per store of sub, the end (last stable offset) of
// its changelog's partition p.
func changelogEnds(ctx context.Context, cl *kgo.Client, sub *subPlan, p int32) (map[string]int64, error) {
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, sub.changelogs...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list changelog end offsets: %w", err)
	}
	out := make(map[string]int64, len(sub.storeNames))
	for i, store := range sub.storeNames {
		lo, ok := ends.Lookup(sub.changelogs[i], p)
		if !ok {
			return nil, fmt.Errorf("changelog %s has no partition %d", sub.changelogs[i], p)
		}
		out[store] = lo.Offset
	}
	return out, nil
}
