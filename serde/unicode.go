package serde

import (
	"bytes"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// CheckJSONUnicode reports the first place in the JSON document doc where
// encoding/json would silently decode U+FFFD instead of what is there: a
// byte sequence that is not valid UTF-8, or a \u escape of a lone UTF-16
// surrogate (\ud800 not followed by a low surrogate's escape, or \udc00
// alone). Two documents that differ only there decode to the same value,
// so a decoder that must not merge different keys or ids refuses them. The
// error names the byte offset. JSON's Deserialize calls it; a hand-written
// JSON codec can call it on its slow path.
//
// Outside strings a JSON document is ASCII, so checking the whole document
// is checking every string; a backslash outside a string makes the
// document invalid, which the decoder then reports.
func CheckJSONUnicode(doc []byte) error {
	if !utf8.Valid(doc) {
		return fmt.Errorf("invalid UTF-8 at byte %d", invalidUTF8(doc))
	}
	for i := bytes.IndexByte(doc, '\\'); i >= 0 && i+1 < len(doc); {
		next := i + 2 // past \" \\ \/ \b \f \n \r \t
		if doc[i+1] == 'u' {
			r, ok := hex4(doc[i+2:])
			if !ok {
				return nil // not JSON: the decoder says so
			}
			next = i + 6
			if utf16.IsSurrogate(r) {
				// A high surrogate must be followed by a low one's escape.
				low, ok := rune(0), false
				if r < 0xdc00 && next+1 < len(doc) && doc[next] == '\\' && doc[next+1] == 'u' {
					low, ok = hex4(doc[next+2:])
				}
				if !ok || low < 0xdc00 || low > 0xdfff {
					return fmt.Errorf("lone surrogate %s at byte %d", doc[i:i+6], i)
				}
				next += 6
			}
		}
		j := bytes.IndexByte(doc[min(next, len(doc)):], '\\')
		if j < 0 {
			break
		}
		i = next + j
	}
	return nil
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// invalidUTF8 is the offset of the first byte of b that does not start a
// valid UTF-8 sequence, or -1.
func invalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// replacedInvalidUTF8 reports whether encoding/json's output out replaced
// invalid UTF-8: it writes the escape \ufffd for each invalid byte (and
// the character itself for a valid U+FFFD), so an escape \ufffd that is
// not itself escaped (preceded by an odd number of backslashes) is a
// replacement. A json.RawMessage or MarshalJSON that writes that escape
// itself is refused too; output that is not valid UTF-8 (from such a
// method) likewise.
func replacedInvalidUTF8(out []byte) bool {
	if !utf8.Valid(out) {
		return true
	}
	esc := []byte(`\ufffd`)
	for i := 0; ; {
		j := bytes.Index(out[i:], esc)
		if j < 0 {
			return false
		}
		j += i
		backslashes := 0
		for k := j; k >= 0 && out[k] == '\\'; k-- {
			backslashes++
		}
		if backslashes%2 == 1 {
			return true
		}
		i = j + 1
	}
}
