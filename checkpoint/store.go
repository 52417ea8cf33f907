// Package checkpoint keeps remote, incremental checkpoints of task databases
// (docs/design.md §4): a consistent copy of a task's database goes to a Store (a
// directory or an S3 bucket) with a manifest that lists its files and the
// offsets it reflects, so that a machine without the task's local state
// restores it from the newest checkpoint and replays only the changelog
// records written since, instead of the whole changelog.
//
// Layout of a task's checkpoints in a store, under the task's prefix (see
// TaskPrefix):
//
//	files/<stem>-<sha256 prefix>.<ext>   one object per distinct file content
//	manifests/<seq, 20 digits>.json      one per checkpoint, newest = highest
//
// Files are content-addressed: a file whose content is already in the store
// is not uploaded again, whatever checkpoint first uploaded it. That is what
// makes checkpoints incremental (an LSM's tables are immutable, so most of a
// database's bytes are in files an earlier checkpoint already holds) and what
// keeps the files that do change between checkpoints (MANIFEST, OPTIONS, a
// write-ahead log) from overwriting the versions older manifests refer to.
package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"strings"
	"time"
)

// Store holds objects by key. Keys are slash-separated relative paths
// ("app/0_1/files/000005-ab12.sst") without empty, "." or ".." segments.
// Implementations are safe for concurrent use.
type Store interface {
	// Put stores size bytes read from r under key, replacing any object
	// there. An object is visible only once Put returned nil: a failed or
	// interrupted Put leaves no partial object under key.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Get returns the object's content; the caller closes it. A missing
	// key gives an error wrapping ErrNotFound.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// List returns every object whose key starts with prefix, in no
	// particular order.
	List(ctx context.Context, prefix string) ([]Object, error)
	// Delete removes the object; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// Object describes one stored object.
type Object struct {
	Key  string
	Size int64
	// Modified is when the object was last written, by the store's clock.
	Modified time.Time
}

// Errors of this package. Each is wrapped with the operation and key that
// met it.
var (
	// ErrNotFound means a key has no object.
	ErrNotFound = errors.New("checkpoint: object not found")
	// ErrDamaged means a checkpoint cannot be used: a manifest that does
	// not decode, or a file missing from the store or whose size or
	// SHA-256 differs from what its manifest records.
	ErrDamaged = errors.New("checkpoint: damaged")
	// ErrBadURL means a checkpoint URL cannot be used.
	ErrBadURL = errors.New("checkpoint: bad URL")
)

// CheckKey reports whether key is usable in every Store.
func CheckKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/") {
		return fmt.Errorf("checkpoint: key %q: want a relative path of non-empty segments, e.g. \"app/0_1/files/000005.sst\"", key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.ContainsAny(seg, "\\\x00") {
			return fmt.Errorf("checkpoint: key %q: segment %q is not allowed (no empty, \".\", \"..\", backslash or NUL segments)", key, seg)
		}
	}
	return nil
}

// Open returns the store a checkpoint URL names:
//
//	file:///absolute/path      a directory (created if missing)
//	s3://bucket/optional/prefix an S3 bucket, configured by the standard
//	                           variables AWS_ENDPOINT_URL (default: AWS),
//	                           AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
//	                           (default: the AWS credential chain) and
//	                           AWS_REGION
//
// An S3 bucket must exist; Open checks that it does.
func Open(ctx context.Context, rawURL string) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w; use file:///absolute/path or s3://bucket/prefix", ErrBadURL, rawURL, err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("%w %q: a file URL has an empty host and an absolute path: write file:///%s%s", ErrBadURL, rawURL, u.Host, u.Path)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("%w %q: a file URL takes no query or fragment; remove them", ErrBadURL, rawURL)
		}
		if u.Path == "" || !path.IsAbs(u.Path) {
			return nil, fmt.Errorf("%w %q: the directory must be an absolute path, e.g. file:///var/lib/eddy/checkpoints", ErrBadURL, rawURL)
		}
		return NewDir(u.Path)
	case "s3":
		if u.Host == "" {
			return nil, fmt.Errorf("%w %q: no bucket; write s3://bucket or s3://bucket/prefix", ErrBadURL, rawURL)
		}
		if u.User != nil || u.Port() != "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("%w %q: an s3 URL is s3://bucket/prefix only; set the endpoint in AWS_ENDPOINT_URL and credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", ErrBadURL, rawURL)
		}
		opts := S3Options{
			Bucket:    u.Host,
			Prefix:    strings.Trim(u.Path, "/"),
			Endpoint:  os.Getenv("AWS_ENDPOINT_URL"),
			AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"),
			SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY"),
			Region:    os.Getenv("AWS_REGION"),
		}
		s, err := NewS3(opts)
		if err != nil {
			return nil, err
		}
		if err := s.CheckBucket(ctx); err != nil {
			return nil, err
		}
		return s, nil
	case "":
		return nil, fmt.Errorf("%w %q: no scheme; use file:///absolute/path or s3://bucket/prefix", ErrBadURL, rawURL)
	}
	return nil, fmt.Errorf("%w %q: scheme %q is not supported; use file:///absolute/path or s3://bucket/prefix", ErrBadURL, rawURL, u.Scheme)
}
