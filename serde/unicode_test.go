package serde

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCheckJSONUnicode checks CheckJSONUnicode against encoding/json
// itself: on a valid JSON document it reports an error exactly when
// encoding/json decodes some string with a U+FFFD the document does not
// spell (as the character or as the escape \ufffd).
func FuzzCheckJSONUnicode(f *testing.F) {
	for _, s := range []string{
		`{"id":"p1","account":"a","amount":5}`,
		"{\"id\":\"x-\xff\"}",
		`{"id":"\ud800"}`, `{"id":"\ud83d\ude00"}`, `["\\ud800", "\uFFFD", "\ufffd"]`,
		`{"\udc00":1}`, `"\ud800\u0041"`, "\"\uFFFD\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		err := CheckJSONUnicode(doc)
		replaced, ok := decodedReplacement(doc)
		if !ok {
			return // not JSON: the decoder refuses it anyway
		}
		if (err != nil) != replaced {
			t.Fatalf("%q: CheckJSONUnicode says %v; encoding/json replaced something: %v", doc, err, replaced)
		}
	})
}

// decodedReplacement decodes doc's tokens with encoding/json and reports
// whether a string (or object key) came out with more U+FFFD than its
// source text spells; ok is false when doc is not one JSON value.
func decodedReplacement(doc []byte) (replaced, ok bool) {
	if !json.Valid(doc) {
		return false, false
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	prev := int64(0)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return replaced, true
		}
		if err != nil {
			return false, false
		}
		off := dec.InputOffset()
		if s, isString := tok.(string); isString && strings.Count(s, "\uFFFD") != spelledFFFD(doc[prev:off]) {
			replaced = true
		}
		prev = off
	}
}

// spelledFFFD counts the U+FFFD that src, the text of a JSON string (with
// what precedes it since the last token), spells: the character itself or
// the escape \ufffd.
func spelledFFFD(src []byte) int {
	n := 0
	for i := 0; i < len(src); {
		switch {
		case src[i] == '\\' && i+1 < len(src) && src[i+1] == 'u':
			if r, ok := hex4(src[i+2:]); ok && r == utf8.RuneError {
				n++
			}
			i += 6
		case src[i] == '\\':
			i += 2
		case bytes.HasPrefix(src[i:], []byte("\uFFFD")):
			n++
			i += 3
		default:
			i++
		}
	}
	return n
}
