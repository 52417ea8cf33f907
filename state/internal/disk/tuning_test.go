package disk

import (
	"strings"
	"testing"
)

// limits of a made-up engine: the backends' own tests check theirs.
var testLimits = Limits{
	Pkg:          "state/test",
	Defaults:     Tuning{CacheSize: 64 << 20, MemTableSize: 16 << 20, MaxOpenFiles: 1000, MaxConcurrentCompactions: 1, L0CompactionThreshold: 4, L0StopWritesThreshold: 12},
	MemTableMin:  64 << 10,
	MemTableMax:  4<<30 - 1,
	MemTableRule: "must be from 64 KiB to 4 GiB",
}

func TestTuningValidate(t *testing.T) {
	valid := []Tuning{
		{},
		{CacheSize: 1, MemTableSize: 64 << 10, MaxOpenFiles: 1, MaxConcurrentCompactions: 8, Compression: "zstd"},
		{MemTableSize: 4<<30 - 1, Compression: "none", L0CompactionThreshold: 2, L0StopWritesThreshold: 2}, // equal is allowed
		{L0StopWritesThreshold: 4, Compression: "snappy"},                                                  // against the default
	}
	for _, tu := range valid {
		if err := tu.Validate(testLimits); err != nil {
			t.Errorf("Validate(%+v) = %v; want nil", tu, err)
		}
	}
	tests := []struct {
		name string
		tune Tuning
		want []string // each in the error
	}{
		{"negative cache", Tuning{CacheSize: -1}, []string{"state/test: Options.CacheSize = -1", "(0 means the default, 64 MiB)"}},
		{"tiny memtable", Tuning{MemTableSize: 1000}, []string{"Options.MemTableSize = 1000: must be from 64 KiB"}},
		{"huge memtable", Tuning{MemTableSize: 4 << 30}, []string{"Options.MemTableSize = 4294967296", "4 GiB"}},
		{"negative open files", Tuning{MaxOpenFiles: -5}, []string{"Options.MaxOpenFiles = -5", "default, 1000"}},
		{"negative compactions", Tuning{MaxConcurrentCompactions: -1}, []string{"Options.MaxConcurrentCompactions = -1"}},
		{"unknown compression", Tuning{Compression: "lz4"}, []string{`Options.Compression = "lz4"`, `"zstd"`}},
		{"case matters", Tuning{Compression: "Zstd"}, []string{`Options.Compression = "Zstd"`}},
		{"negative L0 compaction", Tuning{L0CompactionThreshold: -1}, []string{"Options.L0CompactionThreshold = -1"}},
		{"negative L0 stop", Tuning{L0StopWritesThreshold: -1}, []string{"Options.L0StopWritesThreshold = -1", "default, 12"}},
		{"stop below compaction", Tuning{L0CompactionThreshold: 8, L0StopWritesThreshold: 4}, []string{"Options.L0StopWritesThreshold = 4", "L0CompactionThreshold (8)"}},
		{"stop default below compaction", Tuning{L0CompactionThreshold: 20}, []string{"Options.L0StopWritesThreshold = 12", "L0CompactionThreshold (20)"}},
		// Every problem at once, not the first.
		{"several", Tuning{CacheSize: -1, Compression: "gzip", MaxOpenFiles: -1}, []string{"Options.CacheSize", "Options.Compression", "Options.MaxOpenFiles"}},
	}
	for _, tt := range tests {
		err := tt.tune.Validate(testLimits)
		if err == nil {
			t.Errorf("%s: Validate(%+v) = nil; want an error", tt.name, tt.tune)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Validate = %q; want it to mention %q", tt.name, err, w)
			}
		}
	}
}

func TestTuningWithDefaults(t *testing.T) {
	got := Tuning{MaxOpenFiles: 7, Compression: "zstd"}.WithDefaults(testLimits.Defaults)
	want := testLimits.Defaults
	want.MaxOpenFiles, want.Compression = 7, "zstd"
	if got != want {
		t.Fatalf("WithDefaults = %+v; want %+v", got, want)
	}
	if got := (Tuning{}).WithDefaults(testLimits.Defaults).Compression; got != "snappy" {
		t.Fatalf("default compression %q; want snappy", got)
	}
}
