// DB::VerifyChecksum, which the C API of RocksDB 7.8 lacks; see verify.go.

#ifndef EDDY_VERIFY_H
#define EDDY_VERIFY_H

#include <rocksdb/c.h>

#ifdef __cplusplus
extern "C" {
#endif

// eddy_verify_checksum checks the block checksums of every table file of
// db, without filling the block cache. It returns NULL when they all
// match, else RocksDB's status text, which the caller frees.
char* eddy_verify_checksum(rocksdb_t* db);

#ifdef __cplusplus
}
#endif

#endif
