// Package keys is the key layout that the disk backends (state/pebble,
// state/rocksdb) share: every store of a task lives in one ordered key space.
//
// # Format 2 (current)
//
//	'm'                                 →  0xff, a guard for format 1 readers (below)
//	's' + store name + 0x00 + user key  →  value
//	'z' + "format"                      →  format version, a uvarint (2)
//	'z' + "offsets"                     →  offsets (state/internal/offsetcodec)
//
// Store names never contain 0x00 (state.CheckStoreName), so the 0x00 ends
// the name unambiguously and one store's keys form one contiguous range.
// Data and metadata live in disjoint ranges, so a store scan can never see
// a metadata key.
//
// The metadata sorts after every store key. Every Apply writes the offsets
// key, so every table a flush writes holds it: placed before the stores (as
// format 1 did) it stretched each flushed table over the start of the key
// space, so the table overlapped every table of the level below from there
// to its own keys, and compactions rewrote, and checkpoints re-uploaded,
// tables that had not changed. After the stores, a flushed table spans only
// from the first key it writes to the end.
//
// # Format 1 (unversioned, migrated on open)
//
//	's' + store name + 0x00 + user key  →  value
//	'm'                                 →  offsets
//
// A database with no format key is format 1. Opening it moves its offsets
// to the format 2 key, overwrites 'm' with a guard value that an eddy of
// format 1 cannot decode (so that, rolled back to, it rebuilds the database
// instead of taking it for a new one) and writes the format key, in one
// atomic batch (state/internal/disk), so a crash leaves either format. A
// new database gets the guard and the format key at once.
//
// # Versions
//
// The version only grows, as Pebble's format major version does: a new
// eddy migrates a database one version at a time, each step one atomic
// batch, and an eddy refuses a database of a version newer than its own
// (state.ErrFormat) instead of misreading it.
package keys

// Key prefixes.
const (
	PrefixStore = 's'
	PrefixMeta  = 'z'
	// PrefixMetaV1 is format 1's offsets key, a single byte.
	PrefixMetaV1 = 'm'
)

// Offsets returns the key that holds the offsets. A single key, so reading
// the offsets is one point lookup and Apply replaces them with one Set.
func Offsets() []byte { return []byte{PrefixMeta, 'o', 'f', 'f', 's', 'e', 't', 's'} }

// Format returns the key that holds the format version.
func Format() []byte { return []byte{PrefixMeta, 'f', 'o', 'r', 'm', 'a', 't'} }

// OffsetsV1 returns format 1's offsets key.
func OffsetsV1() []byte { return []byte{PrefixMetaV1} }

// Append appends the database key of user key k in store to dst.
func Append(dst []byte, store string, k []byte) []byte {
	dst = append(dst, PrefixStore)
	dst = append(dst, store...)
	dst = append(dst, 0)
	return append(dst, k...)
}

// PrefixLen is the length of what Append puts before the user key, so a
// database key's user key is key[PrefixLen(store):].
func PrefixLen(store string) int { return len(store) + 2 }

// AppendStoreEnd appends the exclusive upper bound of every key of store: the
// store's prefix with its 0x00 separator raised to 0x01. A longer store name
// that starts with this one ("ab" for "a") continues with a byte of its name
// where this store has the separator; that byte is at least 0x01, since names
// hold no 0x00, so all of that store's keys sort at or after the bound.
func AppendStoreEnd(dst []byte, store string) []byte {
	dst = append(dst, PrefixStore)
	dst = append(dst, store...)
	return append(dst, 1)
}

// StoresStart is the inclusive lower bound of every store key.
func StoresStart() []byte { return []byte{PrefixStore} }

// StoresEnd is the exclusive upper bound of every store key.
func StoresEnd() []byte { return []byte{PrefixStore + 1} }
