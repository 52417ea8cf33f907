package rocksdb

import (
	"strings"
	"testing"
)

// The options are plain Go, so these run with and without the rocksdb tag.

func TestOptionsValidate(t *testing.T) {
	valid := []Options{
		{},
		{CacheSize: 1, MemTableSize: minMemTableSize, MaxOpenFiles: 1, MaxConcurrentCompactions: 8, Compression: CompressionZstd},
		{MemTableSize: maxMemTableSize, Compression: CompressionNone},
		{L0CompactionThreshold: 2, L0StopWritesThreshold: 2},                         // equal is allowed
		{L0StopWritesThreshold: DefaultL0CompactionThreshold, Compression: "snappy"}, // against the default
	}
	for _, o := range valid {
		if err := o.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v; want nil", o, err)
		}
	}
	tests := []struct {
		name string
		opts Options
		want []string // each in the error
	}{
		{"negative cache", Options{CacheSize: -1}, []string{"Options.CacheSize = -1"}},
		{"tiny memtable", Options{MemTableSize: 1000}, []string{"Options.MemTableSize = 1000", "64 KiB"}},
		{"huge memtable", Options{MemTableSize: 65 << 30}, []string{"Options.MemTableSize = 69793218560", "64 GiB"}},
		{"negative open files", Options{MaxOpenFiles: -1}, []string{"Options.MaxOpenFiles = -1"}},
		{"negative compactions", Options{MaxConcurrentCompactions: -2}, []string{"Options.MaxConcurrentCompactions = -2"}},
		{"unknown compression", Options{Compression: "lz4"}, []string{`Options.Compression = "lz4"`, `"zstd"`}},
		{"negative L0 compaction", Options{L0CompactionThreshold: -1}, []string{"Options.L0CompactionThreshold = -1"}},
		{"negative L0 stop", Options{L0StopWritesThreshold: -1}, []string{"Options.L0StopWritesThreshold = -1"}},
		{"stop below compaction", Options{L0CompactionThreshold: 8, L0StopWritesThreshold: 4}, []string{"Options.L0StopWritesThreshold = 4", "L0CompactionThreshold (8)"}},
		{"stop default below compaction", Options{L0CompactionThreshold: 40}, []string{"Options.L0StopWritesThreshold = 36", "L0CompactionThreshold (40)"}},
		// Every problem at once, not the first.
		{"several", Options{CacheSize: -1, Compression: "gzip", MaxOpenFiles: -1}, []string{"Options.CacheSize", "Options.Compression", "Options.MaxOpenFiles"}},
	}
	for _, tt := range tests {
		err := tt.opts.Validate()
		if err == nil {
			t.Errorf("%s: Validate(%+v) = nil; want an error", tt.name, tt.opts)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Validate = %q; want it to mention %q", tt.name, err, w)
			}
		}
	}
}
