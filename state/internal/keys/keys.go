// Package keys is the key layout that the disk backends (state/pebble,
// state/rocksdb) share: every store of a task lives in one ordered key space,
//
//	's' + store name + 0x00 + user key  →  value
//	'm'                                 →  offsets (state/internal/offsetcodec)
//
// Store names never contain 0x00 (state.CheckStoreName), so the 0x00 ends
// the name unambiguously and one store's keys form one contiguous range.
// Data and metadata live in disjoint ranges, so a store scan can never see
// the metadata key.
package keys

// Key prefixes.
const (
	PrefixStore = 's'
	PrefixMeta  = 'm'
)

// Meta returns the key that holds the offsets. A single key, so reading the
// offsets is one point lookup and Apply replaces them with one Set.
func Meta() []byte { return []byte{PrefixMeta} }

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
