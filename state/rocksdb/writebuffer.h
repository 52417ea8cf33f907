// The part of RocksDB's WriteBufferManager that state/rocksdb needs and the
// C API of RocksDB 7.8 lacks (RocksDB added it to c.h in a later release);
// see writebuffer.go.

#ifndef EDDY_WRITEBUFFER_H
#define EDDY_WRITEBUFFER_H

#include <stddef.h>

#include <rocksdb/c.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eddy_write_buffers_t eddy_write_buffers_t;

// eddy_write_buffers_create returns a WriteBufferManager that flushes
// memtables when those of all databases given it pass limit bytes, and
// charges their memory to cache.
eddy_write_buffers_t* eddy_write_buffers_create(size_t limit, rocksdb_cache_t* cache);
// eddy_write_buffers_destroy drops the handle; databases opened with the
// manager keep it alive until they close.
void eddy_write_buffers_destroy(eddy_write_buffers_t* w);
// eddy_write_buffers_set makes databases opened with opt use w.
void eddy_write_buffers_set(rocksdb_options_t* opt, eddy_write_buffers_t* w);
// eddy_write_buffers_charged is what w has charged to the cache for the
// memtables.
size_t eddy_write_buffers_charged(eddy_write_buffers_t* w);

#ifdef __cplusplus
}
#endif

#endif
