//go:build rocksdb

package rocksdb

// #cgo CXXFLAGS: -std=c++17
// #cgo LDFLAGS: -lrocksdb -lstdc++
// #include "writebuffer.h"
import "C"

import (
	"unsafe"

	"github.com/linxGnu/grocksdb"
)

// writeBuffers is a RocksDB WriteBufferManager that every database of a
// Backend shares. It charges their memtables to the block cache, so that
// CacheSize bounds blocks and memtables together, as Pebble does, and as
// Kafka Streams' bounded-memory RocksDBConfigSetter and Flink's managed
// memory configure RocksDB; and it flushes a memtable when those of all the
// databases pass its limit.
//
// Neither grocksdb 1.7.14 nor the C API of RocksDB 7.8 can create one (the
// C API gained rocksdb_write_buffer_manager_create_with_cache later), so
// writebuffer.cc adds the four calls needed, on RocksDB's C++ API.
type writeBuffers struct{ c *C.eddy_write_buffers_t }

// newWriteBuffers returns a manager that charges memtables to cache and
// flushes them past limit bytes.
func newWriteBuffers(limit uint64, cache *grocksdb.Cache) writeBuffers {
	return writeBuffers{C.eddy_write_buffers_create(C.size_t(limit), cCache(cache))}
}

// set makes the databases opened with opts use w.
func (w writeBuffers) set(opts *grocksdb.Options) {
	C.eddy_write_buffers_set(cOptions(opts), w.c)
}

// charged is what w has charged to the cache for the memtables (in steps
// of 256 KiB, so at least their memory).
func (w writeBuffers) charged() uint64 { return uint64(C.eddy_write_buffers_charged(w.c)) }

// destroy drops w; the databases opened with it hold their own references.
func (w writeBuffers) destroy() { C.eddy_write_buffers_destroy(w.c) }

// grocksdb 1.7.14 keeps the C object of a Cache and of an Options in their
// first field, unexported. cCache and cOptions read it there, and check
// what they read against a value read through grocksdb, so that a grocksdb
// laid out otherwise panics here rather than corrupting memory in C.

// cCache returns the rocksdb_cache_t of c.
func cCache(c *grocksdb.Cache) *C.rocksdb_cache_t {
	if unsafe.Sizeof(*c) != unsafe.Sizeof(uintptr(0)) {
		panic("state/rocksdb: grocksdb.Cache is not laid out as in grocksdb 1.7.14")
	}
	return *(**C.rocksdb_cache_t)(unsafe.Pointer(c))
}

// cOptions returns the rocksdb_options_t of o.
func cOptions(o *grocksdb.Options) *C.rocksdb_options_t {
	p := *(**C.rocksdb_options_t)(unsafe.Pointer(o))
	if p == nil || uint64(C.rocksdb_options_get_write_buffer_size(p)) != o.GetWriteBufferSize() {
		panic("state/rocksdb: grocksdb.Options is not laid out as in grocksdb 1.7.14")
	}
	return p
}
