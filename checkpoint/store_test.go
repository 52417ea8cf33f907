package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/eddy-streams/eddy/checkpoint"
	"github.com/eddy-streams/eddy/internal/harness/versitygw"
)

// stores returns one store of each kind, empty: a directory, and an S3
// bucket on a local versitygw (skipped, saying how to install it, when the
// binary is absent).
func stores(t *testing.T) map[string]func(t *testing.T) checkpoint.Store {
	return map[string]func(t *testing.T) checkpoint.Store{
		"dir": func(t *testing.T) checkpoint.Store {
			s, err := checkpoint.NewDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"s3": func(t *testing.T) checkpoint.Store {
			srv := versitygw.ForTest(t, "eddy-test")
			s, err := checkpoint.NewS3(srv.Options("eddy-test", "some/prefix"))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
}

// forEachStore runs fn once per kind of store.
func forEachStore(t *testing.T, fn func(t *testing.T, s checkpoint.Store)) {
	for _, name := range []string{"dir", "s3"} {
		t.Run(name, func(t *testing.T) { fn(t, stores(t)[name](t)) })
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func put(t *testing.T, s checkpoint.Store, key, body string) {
	t.Helper()
	if err := s.Put(ctx(t), key, strings.NewReader(body), int64(len(body))); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func get(t *testing.T, s checkpoint.Store, key string) (string, error) {
	t.Helper()
	r, err := s.Get(ctx(t), key)
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	return string(b), err
}

func keys(t *testing.T, s checkpoint.Store, prefix string) []string {
	t.Helper()
	objs, err := s.List(ctx(t), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.Key)
	}
	slices.Sort(ks)
	return ks
}

// TestStoreConformance is what the runtime relies on, for every store.
func TestStoreConformance(t *testing.T) {
	forEachStore(t, func(t *testing.T, s checkpoint.Store) {
		put(t, s, "app/0_1/files/a.sst", "aaa")
		put(t, s, "app/0_1/files/b.sst", "bbbb")
		put(t, s, "app/0_10/files/c.sst", "c")
		put(t, s, "app/0_1/manifests/1.json", "{}")

		if got, err := get(t, s, "app/0_1/files/b.sst"); err != nil || got != "bbbb" {
			t.Fatalf("get = %q, %v; want bbbb", got, err)
		}
		put(t, s, "app/0_1/files/b.sst", "replaced")
		if got, err := get(t, s, "app/0_1/files/b.sst"); err != nil || got != "replaced" {
			t.Fatalf("get after overwrite = %q, %v", got, err)
		}
		if _, err := get(t, s, "app/0_1/files/none.sst"); !errors.Is(err, checkpoint.ErrNotFound) {
			t.Fatalf("get of a missing key: %v; want ErrNotFound", err)
		}

		// A prefix is a string prefix, not a directory: "0_1/" must not
		// match "0_10/", "app/0_1" matches both.
		if got, want := keys(t, s, "app/0_1/"), []string{"app/0_1/files/a.sst", "app/0_1/files/b.sst", "app/0_1/manifests/1.json"}; !slices.Equal(got, want) {
			t.Fatalf("list app/0_1/ = %v; want %v", got, want)
		}
		if got := keys(t, s, "app/0_1"); len(got) != 4 {
			t.Fatalf("list app/0_1 = %v; want 4 keys", got)
		}
		if got, want := keys(t, s, "app/0_1/files/a"), []string{"app/0_1/files/a.sst"}; !slices.Equal(got, want) {
			t.Fatalf("list app/0_1/files/a = %v; want %v", got, want)
		}
		if got := keys(t, s, "nothing/"); len(got) != 0 {
			t.Fatalf("list of an absent prefix = %v", got)
		}
		objs, err := s.List(ctx(t), "app/0_1/files/b")
		if err != nil || len(objs) != 1 || objs[0].Size != int64(len("replaced")) || objs[0].Modified.IsZero() {
			t.Fatalf("list gives %+v, %v; want the size and modification time of b.sst", objs, err)
		}

		if err := s.Delete(ctx(t), "app/0_1/files/a.sst"); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx(t), "app/0_1/files/a.sst"); err != nil {
			t.Fatalf("deleting a missing key: %v; want no error", err)
		}
		if _, err := get(t, s, "app/0_1/files/a.sst"); !errors.Is(err, checkpoint.ErrNotFound) {
			t.Fatalf("get after delete: %v; want ErrNotFound", err)
		}

		for _, bad := range []string{"", "/abs", "a//b", "a/../b", "a/./b", "trailing/", "back\\slash"} {
			if err := s.Put(ctx(t), bad, strings.NewReader("x"), 1); err == nil {
				t.Errorf("put %q succeeded; want the key rejected", bad)
			}
		}
	})
}

// TestStorePutFailureLeavesNoObject: a Put whose reader fails or is short
// must not leave a partial object that a restore would take for a file.
func TestStorePutFailureLeavesNoObject(t *testing.T) {
	forEachStore(t, func(t *testing.T, s checkpoint.Store) {
		failing := io.MultiReader(strings.NewReader("partial"), iotest.ErrReader(errors.New("disk on fire")))
		if err := s.Put(ctx(t), "k/failed", failing, 100); err == nil {
			t.Fatal("put with a failing reader succeeded")
		}
		if err := s.Put(ctx(t), "k/short", bytes.NewReader([]byte("short")), 100); err == nil {
			t.Fatal("put of fewer bytes than its size succeeded")
		}
		if got := keys(t, s, "k/"); len(got) != 0 {
			t.Fatalf("failed puts left %v", got)
		}
	})
}

func TestOpenURLs(t *testing.T) {
	dir := t.TempDir()
	s, err := checkpoint.Open(ctx(t), "file://"+filepath.ToSlash(dir)+"/cp")
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := s.(*checkpoint.Dir); !ok || d.Root() != filepath.Join(dir, "cp") {
		t.Fatalf("file URL opened %#v", s)
	}
	for _, tt := range []struct{ url, fix string }{
		{"", "no scheme"},
		{"/var/lib/eddy", "no scheme"},
		{"file://relative/dir", "file:///relative/dir"},
		{"file:relative", "absolute path"},
		{"file:///x?y=1", "no query"},
		{"gs://bucket/x", "not supported"},
		{"s3:///prefix-only", "no bucket"},
		{"s3://bucket:9000/x", "AWS_ENDPOINT_URL"},
		{"s3://user:pw@bucket/x", "AWS_ACCESS_KEY_ID"},
		{"http://[::1", "use file:///"},
	} {
		_, err := checkpoint.Open(ctx(t), tt.url)
		if !errors.Is(err, checkpoint.ErrBadURL) || !strings.Contains(err.Error(), tt.fix) {
			t.Errorf("Open(%q) = %v; want ErrBadURL naming %q", tt.url, err, tt.fix)
		}
	}
	t.Setenv("AWS_ENDPOINT_URL", "ftp://host")
	if _, err := checkpoint.Open(ctx(t), "s3://bucket/x"); !errors.Is(err, checkpoint.ErrBadURL) || !strings.Contains(err.Error(), "AWS_ENDPOINT_URL") {
		t.Errorf("bad endpoint: %v; want ErrBadURL naming AWS_ENDPOINT_URL", err)
	}
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	t.Setenv("AWS_ACCESS_KEY_ID", "only-the-id")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	if _, err := checkpoint.Open(ctx(t), "s3://bucket/x"); !errors.Is(err, checkpoint.ErrBadURL) || !strings.Contains(err.Error(), "AWS_SECRET_ACCESS_KEY") {
		t.Errorf("half the credentials: %v; want ErrBadURL naming AWS_SECRET_ACCESS_KEY", err)
	}
}

// TestOpenS3URL opens s3:// URLs with the standard variables against a
// real S3 server: an existing bucket works, a missing one is an error that
// says to create it.
func TestOpenS3URL(t *testing.T) {
	srv := versitygw.ForTest(t, "eddy-open")
	srv.Env(t)
	s, err := checkpoint.Open(ctx(t), "s3://eddy-open/team/app")
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, "k", "v")
	if got, err := get(t, s, "k"); err != nil || got != "v" {
		t.Fatalf("get = %q, %v", got, err)
	}
	// The prefix is under the bucket: another store without it sees the
	// object at team/app/k.
	root, err := checkpoint.NewS3(srv.Options("eddy-open", ""))
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(t, root, ""); !slices.Equal(got, []string{"team/app/k"}) {
		t.Fatalf("bucket holds %v; want team/app/k", got)
	}
	_, err = checkpoint.Open(ctx(t), "s3://no-such-bucket/x")
	if err == nil || !strings.Contains(err.Error(), "create it") {
		t.Fatalf("missing bucket: %v; want an error saying to create it", err)
	}
}
