package runtime

import "testing"

func TestCopyBytesKeepsEmptyApartFromNil(t *testing.T) {
	if copyBytes([]byte("old"), nil) != nil {
		t.Fatal("nil must stay nil (a tombstone or a null key)")
	}
	for _, dst := range [][]byte{nil, {}, []byte("old")} {
		if got := copyBytes(dst, []byte{}); got == nil || len(got) != 0 {
			t.Fatalf("empty must stay empty and non-nil, got %#v", got)
		}
		if got := copyBytes(dst, []byte("v")); string(got) != "v" {
			t.Fatalf("got %q", got)
		}
	}
}
