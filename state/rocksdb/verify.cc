//go:build rocksdb

#include "verify.h"

#include <cstring>

#include <rocksdb/db.h>
#include <rocksdb/options.h>

// As in writebuffer.cc: the C API's wrapper of a DB, as RocksDB's db/c.cc
// defines it.
struct rocksdb_t {
  rocksdb::DB* rep;
};

extern "C" {

char* eddy_verify_checksum(rocksdb_t* db) {
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;  // a check, not a read: keep the other tasks' blocks cached
  rocksdb::Status s = db->rep->VerifyChecksum(ro);
  if (s.ok()) {
    return nullptr;
  }
  return strdup(s.ToString().c_str());
}

}  // extern "C"
