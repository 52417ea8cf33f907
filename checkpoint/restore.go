package checkpoint

import (
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
	"time"
)

// maxManifestSize bounds what ReadManifest reads: a manifest lists a few
// hundred files, so anything this large is not one.
const maxManifestSize = 64 << 20

// ListManifests returns the keys of the manifests under prefix (see
// TaskPrefix), newest first.
func ListManifests(ctx context.Context, store Store, prefix string) ([]string, error) {
	objs, err := store.List(ctx, prefix+manifestsDir)
	if err != nil {
		return nil, err
	}
	type ref struct {
		seq int64
		key string
	}
	var refs []ref
	for _, o := range objs {
		if seq, ok := parseManifestKey(strings.TrimPrefix(o.Key, prefix)); ok {
			refs = append(refs, ref{seq, o.Key})
		}
	}
	slices.SortFunc(refs, func(a, b ref) int { return cmp.Compare(b.seq, a.seq) })
	keys := make([]string, len(refs))
	for i, r := range refs {
		keys[i] = r.key
	}
	return keys, nil
}

// ReadManifest reads and validates the manifest at key. One that does not
// decode wraps ErrDamaged; a missing one ErrNotFound.
func ReadManifest(ctx context.Context, store Store, key string) (*Manifest, error) {
	r, err := store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, maxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read %s: %w", key, err)
	}
	if len(b) > maxManifestSize {
		return nil, fmt.Errorf("%w: manifest %s is larger than %d bytes", ErrDamaged, key, maxManifestSize)
	}
	m, err := DecodeManifest(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return m, nil
}

// DownloadStats describe one Download.
type DownloadStats struct {
	Files int
	Bytes int64
	Took  time.Duration
}

// Download writes the files of m (a manifest under prefix) into dir, which
// it creates and which must not exist, and syncs them. Each file's size
// and SHA-256 are checked against the manifest as it streams in: a file
// missing from the store or different from what the manifest records
// wraps ErrDamaged (try an older manifest). On any error dir is removed.
func Download(ctx context.Context, store Store, prefix string, m *Manifest, dir string) (st DownloadStats, err error) {
	start := time.Now()
	if err := os.Mkdir(dir, 0o700); err != nil {
		return st, fmt.Errorf("checkpoint: download into %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	err = parallel(ctx, len(m.Files), func(ctx context.Context, i int) error {
		return downloadFile(ctx, store, prefix, m.Files[i], filepath.Join(dir, m.Files[i].Name))
	})
	if err != nil {
		return st, err
	}
	if err := syncDir(dir); err != nil {
		return st, err
	}
	for _, f := range m.Files {
		st.Files++
		st.Bytes += f.Size
	}
	st.Took = time.Since(start)
	return st, nil
}

func downloadFile(ctx context.Context, store Store, prefix string, f File, p string) error {
	out, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("checkpoint: download %s: %w", f.Name, err)
	}
	defer out.Close()
	h := sha256.New()
	var n int64
	if f.Size > 0 {
		in, err := store.Get(ctx, prefix+f.Key)
		if errors.Is(err, ErrNotFound) {
			return fmt.Errorf("%w: file %s (%s) is missing from the store: %w", ErrDamaged, f.Name, f.Key, err)
		}
		if err != nil {
			return err
		}
		defer in.Close()
		// One more byte than expected, so a longer object is caught.
		n, err = io.Copy(io.MultiWriter(out, h), io.LimitReader(in, f.Size+1))
		if err != nil {
			return fmt.Errorf("checkpoint: download %s: %w", f.Key, err)
		}
	}
	if n != f.Size {
		return fmt.Errorf("%w: file %s (%s) has %d bytes, its manifest says %d", ErrDamaged, f.Name, f.Key, n, f.Size)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != f.SHA256 {
		return fmt.Errorf("%w: file %s (%s) has SHA-256 %s, its manifest says %s", ErrDamaged, f.Name, f.Key, sum, f.SHA256)
	}
	if err := out.Sync(); err != nil {
		return fmt.Errorf("checkpoint: download %s: %w", f.Name, err)
	}
	return out.Close()
}
