package disk

import (
	"errors"
	"fmt"
)

// Tuning is what the Options of state/pebble and state/rocksdb have in
// common, as plain values: each backend converts its Options to a Tuning to
// validate them and fill in its defaults, so that the two report a bad value
// the same way. What a field means to each engine is documented on its
// Options.
type Tuning struct {
	CacheSize                int64
	MemTableSize             uint64
	MaxOpenFiles             int
	MaxConcurrentCompactions int
	Compression              string // "", "none", "snappy" or "zstd"
	L0CompactionThreshold    int
	L0StopWritesThreshold    int
}

// Limits are one backend's defaults and the memtable sizes its engine
// takes.
type Limits struct {
	// Pkg prefixes every error ("state/pebble").
	Pkg      string
	Defaults Tuning
	// MemTableMin and MemTableMax bound a non-zero MemTableSize;
	// MemTableRule says so in an error ("must be below 4 GiB, Pebble's
	// limit").
	MemTableMin, MemTableMax uint64
	MemTableRule             string
}

// WithDefaults returns t with every zero field set to its default.
func (t Tuning) WithDefaults(d Tuning) Tuning {
	t.CacheSize = or(t.CacheSize, d.CacheSize)
	t.MemTableSize = or(t.MemTableSize, d.MemTableSize)
	t.MaxOpenFiles = or(t.MaxOpenFiles, d.MaxOpenFiles)
	t.MaxConcurrentCompactions = or(t.MaxConcurrentCompactions, d.MaxConcurrentCompactions)
	t.Compression = or(t.Compression, "snappy")
	t.L0CompactionThreshold = or(t.L0CompactionThreshold, d.L0CompactionThreshold)
	t.L0StopWritesThreshold = or(t.L0StopWritesThreshold, d.L0StopWritesThreshold)
	return t
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Validate reports every invalid field of t at once, each error naming its
// Options field, the value, and what a valid one is.
func (t Tuning) Validate(l Limits) error {
	var errs []error
	bad := func(field string, v any, why string) {
		errs = append(errs, fmt.Errorf("%s: Options.%s = %v: %s", l.Pkg, field, v, why))
	}
	negative := func(field string, v int64, def string) {
		if v < 0 {
			bad(field, v, fmt.Sprintf("must not be negative (0 means the default, %s)", def))
		}
	}
	d := l.Defaults
	negative("CacheSize", t.CacheSize, fmt.Sprintf("%d MiB", d.CacheSize>>20))
	if t.MemTableSize != 0 && (t.MemTableSize < l.MemTableMin || t.MemTableSize > l.MemTableMax) {
		bad("MemTableSize", t.MemTableSize, l.MemTableRule)
	}
	negative("MaxOpenFiles", int64(t.MaxOpenFiles), fmt.Sprint(d.MaxOpenFiles))
	negative("MaxConcurrentCompactions", int64(t.MaxConcurrentCompactions), fmt.Sprint(d.MaxConcurrentCompactions))
	switch t.Compression {
	case "", "none", "snappy", "zstd":
	default:
		bad("Compression", fmt.Sprintf("%q", t.Compression), `must be "none", "snappy" or "zstd" (empty means snappy)`)
	}
	negative("L0CompactionThreshold", int64(t.L0CompactionThreshold), fmt.Sprint(d.L0CompactionThreshold))
	negative("L0StopWritesThreshold", int64(t.L0StopWritesThreshold), fmt.Sprint(d.L0StopWritesThreshold))
	if t.L0CompactionThreshold >= 0 && t.L0StopWritesThreshold >= 0 {
		// The engines would otherwise stop writes before level 0
		// compacts (Pebble) or silently raise the stop (RocksDB).
		if w := t.WithDefaults(d); w.L0StopWritesThreshold < w.L0CompactionThreshold {
			bad("L0StopWritesThreshold", w.L0StopWritesThreshold, fmt.Sprintf("must be at least L0CompactionThreshold (%d), or writes stop before level 0 compacts", w.L0CompactionThreshold))
		}
	}
	return errors.Join(errs...)
}
