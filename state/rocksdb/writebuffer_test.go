//go:build rocksdb

package rocksdb

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/statetest"
)

// intProperty reads one of RocksDB's integer properties of d.
func intProperty(t *testing.T, d state.DB, name string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(d.(*db).rdb.GetProperty(name), 10, 64)
	if err != nil {
		t.Fatalf("property %s: %v", name, err)
	}
	return v
}

// TestMemTablesChargedToCache: the memtables of a Backend's databases take
// their memory from the block cache, and RocksDB flushes them when together
// they pass a third of it, however large MemTableSize is.
func TestMemTablesChargedToCache(t *testing.T) {
	const cacheSize = 12 << 20 // memtables flush past 4 MiB
	// A memtable far larger than what the test writes: only the
	// WriteBufferManager can make RocksDB switch it.
	b := newBackend(t, Options{CacheSize: cacheSize, MemTableSize: 256 << 20})
	dirs := []string{t.TempDir(), t.TempDir()}
	var dbs []state.DB
	for _, dir := range dirs {
		d := statetest.Open(t, b, dir)
		defer d.Close()
		dbs = append(dbs, d)
	}
	value := bytes.Repeat([]byte("v"), 1000)
	write := func(d state.DB, from, n int) {
		t.Helper()
		var writes []state.Write
		for i := from; i < from+n; i++ {
			writes = append(writes, state.Write{Store: "s", Key: fmt.Appendf(nil, "k%08d", i), Value: value})
		}
		if err := d.Apply(&state.Batch{Writes: writes}); err != nil {
			t.Fatal(err)
		}
	}

	// 1 MiB in each database: well under the limit, so nothing flushes,
	// and the cache, which nothing has read through yet, holds the
	// memtables.
	for _, d := range dbs {
		write(d, 0, 1000)
	}
	var memtables uint64
	for _, d := range dbs {
		memtables += intProperty(t, d, "rocksdb.cur-size-all-mem-tables")
	}
	if memtables < 2<<20 {
		t.Fatalf("memtables hold %d bytes after writing 2 MB", memtables)
	}
	// Both databases report the one cache they share.
	cacheUsage := intProperty(t, dbs[0], "rocksdb.block-cache-usage")
	if cacheUsage < memtables {
		t.Errorf("block cache holds %d bytes with %d bytes of memtables; want them charged to it", cacheUsage, memtables)
	}
	if cm := b.CacheMetrics(); cm.Bytes >= int64(memtables) || cm.Bytes > int64(cacheUsage) {
		t.Errorf("CacheMetrics().Bytes = %d with %d bytes in the cache, %d of memtables; want the memtables left out", cm.Bytes, cacheUsage, memtables)
	}

	// 6 MB more into the first database: past the limit, RocksDB switches
	// its memtable (to flush it) long before it holds 256 MiB.
	for i := range 6 {
		write(dbs[0], 1000+i*1000, 1000)
	}
	tables, _ := filepath.Glob(filepath.Join(dirs[0], "*.sst"))
	switched := uint64(len(tables)) + intProperty(t, dbs[0], "rocksdb.num-immutable-mem-table")
	if switched == 0 {
		t.Fatalf("no memtable switched after 7 MB in a 256 MiB memtable, under a %d MiB limit", cacheSize/memTableShare>>20)
	}
	// RocksDB checks the limit before a write and switches the memtable
	// at the next one: the memtable can pass the limit by one batch.
	const batch = 1 << 20 // a write of 1000 values of 1 KB, with keys
	if got := intProperty(t, dbs[0], "rocksdb.cur-size-active-mem-table"); got > cacheSize/memTableShare+batch {
		t.Errorf("active memtable holds %d bytes; want at most the %d limit and one batch", got, cacheSize/memTableShare)
	}
}

// TestArenaBlockSize: RocksDB's default where it fits, the limit's 1/64
// where it does not, never below RocksDB's 4 KiB.
func TestArenaBlockSize(t *testing.T) {
	for _, tt := range []struct{ memTable, limit, want uint64 }{
		{4 << 20, 1 << 30, 512 << 10}, // a memtable's eighth
		{64 << 20, 1 << 30, 1 << 20},  // at most 1 MiB
		{4 << 20, 8 << 20, 128 << 10}, // the limit's 1/64
		{4 << 20, 64 << 10, 4096},     // at least 4 KiB
		{4 << 20, 1000 << 10, 16000 - 16000%4096},
	} {
		if got := arenaBlockSize(tt.memTable, tt.limit); got != tt.want {
			t.Errorf("arenaBlockSize(%d, %d) = %d; want %d", tt.memTable, tt.limit, got, tt.want)
		}
	}
}
