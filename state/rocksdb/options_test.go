package rocksdb

import (
	"strings"
	"testing"
)

// The options are plain Go, so these run with and without the rocksdb tag.

// TestOptionsValidate checks that RocksDB's range and defaults reach the
// shared validation (state/internal/disk tests the rest of it).
func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{MemTableSize: minMemTableSize}, {MemTableSize: maxMemTableSize, L0StopWritesThreshold: DefaultL0CompactionThreshold}} {
		if err := o.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v; want nil", o, err)
		}
	}
	checks := map[Options]string{
		{MemTableSize: 1000}:                "state/rocksdb: Options.MemTableSize = 1000: must be from 64 KiB to 64 GiB, RocksDB's range",
		{MemTableSize: 65 << 30}:            "Options.MemTableSize = 69793218560: must be from 64 KiB",
		{MaxOpenFiles: -1}:                  "Options.MaxOpenFiles = -1: must not be negative (0 means the default, 256)",
		{L0CompactionThreshold: 40}:         "Options.L0StopWritesThreshold = 36: must be at least L0CompactionThreshold (40)",
		{Compression: "lz4", CacheSize: -1}: `Options.Compression = "lz4"`,
	}
	for o, want := range checks {
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate(%+v) = %v; want it to say %q", o, err, want)
		}
	}
}
