package keys

import (
	"bytes"
	"testing"
)

// TestStoreRanges checks the property both backends' scans and range deletes
// rely on: a store's keys, and nothing else, sort in
// [Append(store, nil), AppendStoreEnd(store)), for store names that are
// prefixes of each other.
func TestStoreRanges(t *testing.T) {
	stores := []string{"a", "a\x01", "a\xff", "ab", "abc", "b", "\xff"}
	userKeys := [][]byte{nil, {0}, []byte("k"), {0xff, 0xff, 0xff}}
	for _, s := range stores {
		lo, hi := Append(nil, s, nil), AppendStoreEnd(nil, s)
		for _, other := range stores {
			for _, k := range userKeys {
				key := Append(nil, other, k)
				in := bytes.Compare(key, lo) >= 0 && bytes.Compare(key, hi) < 0
				if in != (other == s) {
					t.Errorf("key %q of store %q in [%q, %q) = %v; want %v", key, other, lo, hi, in, other == s)
				}
				if other == s && !bytes.Equal(key[PrefixLen(s):], k) {
					t.Errorf("user key of %q = %q; want %q", key, key[PrefixLen(s):], k)
				}
			}
		}
		for _, m := range [][]byte{Offsets(), Format(), OffsetsV1()} {
			if bytes.Compare(m, lo) >= 0 && bytes.Compare(m, hi) < 0 {
				t.Errorf("meta key %q inside store %q", m, s)
			}
		}
		if bytes.Compare(lo, StoresStart()) < 0 || bytes.Compare(hi, StoresEnd()) > 0 {
			t.Errorf("store %q range [%q, %q) outside [StoresStart, StoresEnd)", s, lo, hi)
		}
	}
}

// TestMetaAfterStores pins format 2's point: the metadata sorts after every
// store key, so a flushed table with the offsets key does not span the key
// space before its store keys.
func TestMetaAfterStores(t *testing.T) {
	for _, m := range [][]byte{Offsets(), Format()} {
		if bytes.Compare(m, StoresEnd()) < 0 {
			t.Errorf("meta key %q sorts before the end of the stores %q", m, StoresEnd())
		}
	}
	if bytes.Equal(Offsets(), Format()) {
		t.Error("offsets and format share a key")
	}
}
