package checkpoint

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/eddy-streams/eddy/state"
)

// DefaultKeep is how many checkpoints per task an Uploader keeps when
// asked for zero or fewer.
const DefaultKeep = 3

// transfers is how many files an upload or a download moves at once: S3
// gives each request a latency that parallel requests hide.
const transfers = 8

// Uploader uploads the checkpoints of one task. Upload calls must not
// overlap (the runtime runs at most one per task); everything else about
// the store is re-read on each call, so another instance that took the
// task over, or an operator deleting objects, is seen.
type Uploader struct {
	store  Store
	prefix string
	task   string
	keep   int
	// sums caches file checksums by name, size and modification time, so
	// the tables a checkpoint hard-links again are not read again.
	sums map[fileID]string
	// manifests caches decoded manifests by key: a written manifest never
	// changes.
	manifests map[string]*Manifest

	// BeforeManifest and AfterManifest, when set, are called once a
	// checkpoint's files are uploaded and before its manifest is, and
	// once the manifest is uploaded and before old checkpoints are
	// collected: the points where crash tests crash an upload.
	BeforeManifest, AfterManifest func()
}

type fileID struct {
	name  string
	size  int64
	mtime int64
}

// UploadStats describe one Upload.
type UploadStats struct {
	Seq int64
	// Files and Bytes are the checkpoint's; Uploaded and UploadedBytes
	// what was not in the store already.
	Files, Uploaded           int
	Bytes, UploadedBytes      int64
	DeletedManifests, Deleted int
	Took                      time.Duration
	// Written is set once the manifest was written: the checkpoint is in
	// the store, even if Upload then failed to collect old ones.
	Written bool
	// Skipped is set when the newest checkpoint in the store reflects the
	// same offsets, hence the same state: nothing was uploaded.
	Skipped bool
}

// NewUploader returns an uploader of task's checkpoints under prefix (see
// TaskPrefix), keeping the newest keep (DefaultKeep if keep < 1).
func NewUploader(store Store, prefix, task string, keep int) *Uploader {
	if keep < 1 {
		keep = DefaultKeep
	}
	return &Uploader{
		store: store, prefix: prefix, task: task, keep: keep,
		sums:      make(map[fileID]string),
		manifests: make(map[string]*Manifest),
	}
}

// Upload sends the database checkpoint in dir, whose state reflects
// offsets: the files the store lacks, then a manifest, then it deletes the
// manifests beyond the newest keep and the files no kept manifest needs.
// A failure of that last step is returned with the stats of a successful
// upload (the checkpoint is usable; collection is retried next time).
func (u *Uploader) Upload(ctx context.Context, dir string, offsets state.Offsets) (UploadStats, error) {
	start := time.Now()
	var st UploadStats
	listing, err := u.store.List(ctx, u.prefix)
	if err != nil {
		return st, err
	}
	sizes := make(map[string]int64, len(listing))
	var maxSeq int64 = -1
	for _, o := range listing {
		rel := strings.TrimPrefix(o.Key, u.prefix)
		sizes[rel] = o.Size
		if seq, ok := parseManifestKey(rel); ok {
			maxSeq = max(maxSeq, seq)
		}
	}
	if maxSeq >= 0 {
		// The same offsets are the same state (it is a function of the
		// changelog's prefix): a restarted task that processed nothing
		// has nothing to upload. A newest manifest that cannot be read,
		// or whose files are not all there, does not stop this one.
		newest, err := u.manifest(ctx, u.prefix+manifestKey(maxSeq))
		if err == nil && Equal(newest.Offsets.State(), offsets) && complete(newest, sizes) {
			st.Skipped = true
			st.Took = time.Since(start)
			return st, nil
		}
	}
	files, err := u.describe(dir)
	if err != nil {
		return st, err
	}
	m := &Manifest{Version: ManifestVersion, Task: u.task, Seq: maxSeq + 1, Offsets: OffsetsFrom(offsets), Files: files}
	var todo []File
	for _, f := range files {
		st.Files++
		st.Bytes += f.Size
		// An object of another size under the key is damaged: replace
		// it rather than refer to it again.
		if size, ok := sizes[f.Key]; f.Key != "" && (!ok || size != f.Size) {
			todo = append(todo, f)
			sizes[f.Key] = f.Size // two files with one content: upload once
		}
	}
	err = parallel(ctx, len(todo), func(ctx context.Context, i int) error {
		return u.putFile(ctx, filepath.Join(dir, todo[i].Name), todo[i])
	})
	if err != nil {
		return st, err
	}
	for _, f := range todo {
		st.Uploaded++
		st.UploadedBytes += f.Size
	}
	m.Created = time.Now().UTC()
	body, err := m.Encode()
	if err != nil {
		return st, err
	}
	key := u.prefix + manifestKey(m.Seq)
	if u.BeforeManifest != nil {
		u.BeforeManifest()
	}
	if err := u.store.Put(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
		return st, err
	}
	if u.AfterManifest != nil {
		u.AfterManifest()
	}
	u.manifests[key] = m
	st.Seq, st.Written = m.Seq, true
	st.DeletedManifests, st.Deleted, err = u.collect(ctx)
	st.Took = time.Since(start)
	if err != nil {
		return st, fmt.Errorf("checkpoint %d of task %s uploaded; collecting old ones failed (retried at the next checkpoint): %w", m.Seq, u.task, err)
	}
	return st, nil
}

// complete reports whether every file of m is listed with its size.
func complete(m *Manifest, sizes map[string]int64) bool {
	for _, f := range m.Files {
		if size, ok := sizes[f.Key]; f.Key != "" && (!ok || size != f.Size) {
			return false
		}
	}
	return true
}

// describe lists the regular files of dir with their checksums and keys.
func (u *Uploader) describe(dir string) ([]File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read %s: %w", dir, err)
	}
	var files []File
	seen := make(map[fileID]bool, len(entries))
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue // Pebble keeps no subdirectories in a database directory
		}
		info, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("checkpoint: stat %s: %w", filepath.Join(dir, e.Name()), err)
		}
		id := fileID{name: e.Name(), size: info.Size(), mtime: info.ModTime().UnixNano()}
		seen[id] = true
		sum, ok := u.sums[id]
		if !ok {
			if sum, err = hashFile(filepath.Join(dir, e.Name())); err != nil {
				return nil, err
			}
			u.sums[id] = sum
		}
		f := File{Name: e.Name(), Size: info.Size(), SHA256: sum}
		if f.Size > 0 {
			f.Key = fileKey(f.Name, sum)
		}
		files = append(files, f)
	}
	// Forget files that left the database, so the cache does not grow
	// with its history.
	for id := range u.sums {
		if !seen[id] {
			delete(u.sums, id)
		}
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	return files, nil
}

func hashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("checkpoint: read %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (u *Uploader) putFile(ctx context.Context, p string, f File) error {
	r, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	defer r.Close()
	return u.store.Put(ctx, u.prefix+f.Key, r, f.Size)
}

// collect applies the retention: walking the manifests newest first, it
// keeps the first u.keep that decode and deletes every older one, then
// deletes the files that no kept manifest lists and that either a deleted
// manifest listed or are older than the oldest kept manifest (orphans of an
// upload that failed before its manifest). Files newer than that are left:
// they may belong to an upload in flight elsewhere (the task's previous
// owner finishing its last checkpoint). A manifest that cannot be read
// (not: does not decode) stops the collection, so a store that is briefly
// unreachable never loses the checkpoints it holds. A manifest of a newer
// version (ErrVersion: a newer eddy shares the store, as in a rolling
// upgrade) is kept, and no file is deleted, since this eddy cannot know
// which files it lists.
func (u *Uploader) collect(ctx context.Context) (manifests, files int, err error) {
	listing, err := u.store.List(ctx, u.prefix)
	if err != nil {
		return 0, 0, err
	}
	type ref struct {
		seq int64
		obj Object
	}
	var refs []ref
	for _, o := range listing {
		if seq, ok := parseManifestKey(strings.TrimPrefix(o.Key, u.prefix)); ok {
			refs = append(refs, ref{seq, o})
		}
	}
	slices.SortFunc(refs, func(a, b ref) int { return cmp.Compare(b.seq, a.seq) })
	kept := map[string]bool{}    // file keys, relative
	dropped := map[string]bool{} // file keys, relative
	var drop []string
	var oldestKept time.Time
	n := 0
	newer := false // a manifest of a newer version lists files we cannot see
	for _, r := range refs {
		m, err := u.manifest(ctx, r.obj.Key)
		switch {
		case errors.Is(err, ErrVersion):
			newer = true
			continue
		case errors.Is(err, ErrDamaged):
			if n >= u.keep {
				drop = append(drop, r.obj.Key)
			}
			continue // a damaged manifest restores nothing: it does not count
		case errors.Is(err, ErrNotFound):
			continue // deleted since the listing
		case err != nil:
			return 0, 0, err
		}
		if n < u.keep {
			n++
			oldestKept = r.obj.Modified
			for _, f := range m.Files {
				kept[f.Key] = true
			}
			continue
		}
		drop = append(drop, r.obj.Key)
		for _, f := range m.Files {
			dropped[f.Key] = true
		}
	}
	for _, key := range drop {
		if err := u.store.Delete(ctx, key); err != nil {
			return manifests, files, err
		}
		delete(u.manifests, key)
		manifests++
	}
	for _, o := range listing {
		rel := strings.TrimPrefix(o.Key, u.prefix)
		if newer || !strings.HasPrefix(rel, filesDir) || kept[rel] {
			continue
		}
		if dropped[rel] || (!oldestKept.IsZero() && o.Modified.Before(oldestKept)) {
			if err := u.store.Delete(ctx, o.Key); err != nil {
				return manifests, files, err
			}
			files++
		}
	}
	return manifests, files, nil
}

func (u *Uploader) manifest(ctx context.Context, key string) (*Manifest, error) {
	if m, ok := u.manifests[key]; ok {
		return m, nil
	}
	m, err := ReadManifest(ctx, u.store, key)
	if err != nil {
		return nil, err
	}
	u.manifests[key] = m
	return m, nil
}

// parallel runs fn(0..n-1), at most transfers at a time, and returns the
// first error; the others are cancelled.
func parallel(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  int
	)
	for w := 0; w < min(n, transfers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil
				mu.Unlock()
				if i >= n || stop {
					return
				}
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
						cancel()
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}
