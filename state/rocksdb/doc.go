// Package rocksdb is a state.Backend on RocksDB, through cgo
// (github.com/linxGnu/grocksdb), for users who want the engine Kafka Streams
// and Flink run on, or its tooling (ldb, sst_dump) on their task state.
// Pebble (state/pebble) stays the default: it needs no C toolchain, and the
// runtime's checkpoints and crash tests are built on it.
//
// The implementation is behind the build tag rocksdb, so that eddy builds
// without a C compiler or librocksdb. With the tag, the package links against
// the system's librocksdb and compiles a few lines of C++ (writebuffer.cc);
// on Debian bookworm:
//
//	apt-get install -y librocksdb-dev g++
//	go test -tags rocksdb ./state/rocksdb
//
// librocksdb-dev 7.8 (bookworm) matches grocksdb v1.7.14, the release built
// for RocksDB 7.8.3; later grocksdb releases call C functions that 7.8 lacks.
// Without the tag, New still compiles and Open fails with ErrNotBuilt, so a
// program can offer RocksDB as a runtime choice and report the fix.
//
// Memory is bounded as with state/pebble: Options.CacheSize is one budget
// for the databases' blocks and memtables. Every database shares one LRU
// block cache, which also holds the index and filter blocks (with high
// priority), and one WriteBufferManager, which charges the memtables to that
// cache and flushes one when together they pass a third of it; tables have
// 10-bit bloom filters. Backend.CacheMetrics reports the cache.
//
// Each task's database is one RocksDB database with the key layout and
// format version of state/internal/keys, read, migrated and written by
// state/internal/disk exactly as state/pebble's are (the files differ: a
// task directory cannot switch backends; Destroy it and restore from the
// changelog instead).
// Every Apply is one synced WriteBatch: its range deletes, then its writes,
// then the offsets.
package rocksdb
