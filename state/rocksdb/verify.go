//go:build rocksdb

package rocksdb

// #include <stdlib.h>
// #include "verify.h"
import "C"

import (
	"errors"
	"unsafe"

	"github.com/linxGnu/grocksdb"
)

// verifyChecksum checks the block checksums of every table of rdb
// (RocksDB's DB::VerifyChecksum, which reads the stored blocks without
// filling the block cache), so that a damaged block is found when the
// database opens rather than by the first read that meets it. Its error
// is RocksDB's status text ("Corruption: block checksum mismatch ..."),
// which isCorruption recognizes.
func verifyChecksum(rdb *grocksdb.DB) error {
	msg := C.eddy_verify_checksum(cDB(rdb))
	if msg == nil {
		return nil
	}
	defer C.free(unsafe.Pointer(msg))
	return errors.New(C.GoString(msg))
}

// cDB returns the rocksdb_t of d: grocksdb 1.7.14 keeps it in the DB's
// first field, unexported (see cCache). What it reads is checked against a
// property read through grocksdb, so that a grocksdb laid out otherwise
// panics here rather than corrupting memory in C.
func cDB(d *grocksdb.DB) *C.rocksdb_t {
	p := *(**C.rocksdb_t)(unsafe.Pointer(d))
	if p == nil {
		panic("state/rocksdb: grocksdb.DB is not laid out as in grocksdb 1.7.14")
	}
	name := C.CString("rocksdb.num-files-at-level0")
	defer C.free(unsafe.Pointer(name))
	v := C.rocksdb_property_value(p, name)
	if v == nil {
		panic("state/rocksdb: grocksdb.DB is not laid out as in grocksdb 1.7.14")
	}
	defer C.free(unsafe.Pointer(v))
	if C.GoString(v) != d.GetProperty("rocksdb.num-files-at-level0") {
		panic("state/rocksdb: grocksdb.DB is not laid out as in grocksdb 1.7.14")
	}
	return p
}
