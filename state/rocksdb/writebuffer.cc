//go:build rocksdb

#include "writebuffer.h"

#include <memory>

#include <rocksdb/cache.h>
#include <rocksdb/options.h>
#include <rocksdb/write_buffer_manager.h>

// RocksDB's C API wraps its C++ objects in these structs, defined in its
// db/c.cc and nowhere in its headers; the definitions here are the same, so
// that this file reaches the objects the way c.cc does.
struct rocksdb_options_t {
  rocksdb::Options rep;
};
struct rocksdb_cache_t {
  std::shared_ptr<rocksdb::Cache> rep;
};

struct eddy_write_buffers_t {
  std::shared_ptr<rocksdb::WriteBufferManager> rep;
};

extern "C" {

eddy_write_buffers_t* eddy_write_buffers_create(size_t limit, rocksdb_cache_t* cache) {
  // allow_stall false: over the limit, RocksDB flushes the memtables of
  // the database writing instead of stalling the writes of every database.
  return new eddy_write_buffers_t{std::make_shared<rocksdb::WriteBufferManager>(limit, cache->rep, false)};
}

void eddy_write_buffers_destroy(eddy_write_buffers_t* w) { delete w; }

void eddy_write_buffers_set(rocksdb_options_t* opt, eddy_write_buffers_t* w) {
  opt->rep.write_buffer_manager = w->rep;
}

size_t eddy_write_buffers_charged(eddy_write_buffers_t* w) { return w->rep->dummy_entries_in_cache_usage(); }

}  // extern "C"
