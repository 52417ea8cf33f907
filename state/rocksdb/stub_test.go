//go:build !rocksdb

package rocksdb

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestNotBuilt(t *testing.T) {
	b := New(Options{})
	dir := filepath.Join(t.TempDir(), "task")
	if _, err := b.Open(dir); !errors.Is(err, ErrNotBuilt) {
		t.Fatalf("Open without the rocksdb tag: %v; want ErrNotBuilt", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("Open without the rocksdb tag created the directory")
	}
	if err := b.Destroy(dir); !errors.Is(err, ErrNotBuilt) {
		t.Fatalf("Destroy without the rocksdb tag: %v; want ErrNotBuilt", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
