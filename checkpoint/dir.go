package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Dir is a Store in a local (or mounted network) directory: key a/b/c is
// the file <root>/a/b/c.
type Dir struct {
	root string
}

var _ Store = (*Dir)(nil)

// tmpDir holds objects being written, so a crash mid-Put leaves no partial
// object under a key (List skips it).
const tmpDir = ".tmp"

// NewDir returns the store rooted at dir, creating dir if needed.
func NewDir(dir string) (*Dir, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("%w: directory %q is relative; give an absolute path", ErrBadURL, dir)
	}
	if err := os.MkdirAll(filepath.Join(dir, tmpDir), 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint: store directory %s: %w; create it or fix its permissions", dir, err)
	}
	return &Dir{root: filepath.Clean(dir)}, nil
}

// Root is the store's directory.
func (d *Dir) Root() string { return d.root }

func (d *Dir) path(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	if key == tmpDir || strings.HasPrefix(key, tmpDir+"/") {
		return "", fmt.Errorf("checkpoint: key %q: %s/ is the directory store's own; use another key", key, tmpDir)
	}
	return filepath.Join(d.root, filepath.FromSlash(key)), nil
}

// Put writes the object to a temporary file, syncs it and renames it into
// place, so that the key holds either the old object or the whole new one.
func (d *Dir) Put(ctx context.Context, key string, r io.Reader, size int64) (err error) {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("checkpoint: put %s: %w", key, err)
	}
	f, err := os.CreateTemp(filepath.Join(d.root, tmpDir), "put-*")
	if err != nil {
		return fmt.Errorf("checkpoint: put %s: %w", key, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	n, err := io.Copy(f, ctxReader{ctx, r})
	if err != nil {
		return fmt.Errorf("checkpoint: put %s: %w", key, err)
	}
	if n != size {
		return fmt.Errorf("checkpoint: put %s: read %d bytes, want %d (the file changed while it was uploaded?)", key, n, size)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("checkpoint: put %s: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("checkpoint: put %s: %w", key, err)
	}
	if err := os.Rename(f.Name(), p); err != nil {
		return fmt.Errorf("checkpoint: put %s: %w", key, err)
	}
	// The rename is durable once the directory is synced.
	return syncDir(filepath.Dir(p))
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("checkpoint: sync %s: %w", dir, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("checkpoint: sync %s: %w", dir, err)
	}
	return nil
}

func (d *Dir) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint: get %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: get %s: %w", key, err)
	}
	return f, nil
}

func (d *Dir) List(ctx context.Context, prefix string) ([]Object, error) {
	// Walk the deepest directory that holds every key with the prefix.
	start := d.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = filepath.Join(d.root, filepath.FromSlash(prefix[:i]))
	}
	var objs []Object
	err := filepath.WalkDir(start, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // no key has the prefix
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(d.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if e.IsDir() {
			if key == tmpDir {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasPrefix(key, prefix) || !e.Type().IsRegular() {
			return nil
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted while we listed
		}
		if err != nil {
			return err
		}
		objs = append(objs, Object{Key: key, Size: info.Size(), Modified: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list %s in %s: %w", prefix, d.root, err)
	}
	return objs, nil
}

func (d *Dir) Delete(ctx context.Context, key string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checkpoint: delete %s: %w", key, err)
	}
	return nil
}

// ctxReader stops a copy once ctx is done, so a Put of a large file to a
// slow disk is cancellable like an S3 upload.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
