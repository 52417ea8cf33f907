package eddy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Header keys a dead letter carries only when it was truncated: the source
// record with the failure's headers was larger than Config.MaxRecordBytes,
// so its key and value were cut (and its own headers dropped if even they
// did not fit). Without truncation such a record could not be
// dead-lettered at all, and would stop the app again after every restart.
const (
	// HeaderDLQTruncated lists what was cut, comma-separated, in this
	// order: "headers" (the source record's own headers, dropped), "key"
	// and "value" (each cut to a prefix).
	HeaderDLQTruncated = "eddy.truncated"
	// HeaderDLQKeySize and HeaderDLQValueSize are the source record's key
	// and value sizes in bytes, in decimal.
	HeaderDLQKeySize   = "eddy.key.size"
	HeaderDLQValueSize = "eddy.value.size"
	// HeaderDLQKeySHA256 and HeaderDLQValueSHA256 are the SHA-256 of the
	// source record's whole key and value, in lowercase hex, to find the
	// original in the source topic or to tell two dead letters apart.
	HeaderDLQKeySHA256   = "eddy.key.sha256"
	HeaderDLQValueSHA256 = "eddy.value.sha256"
)

// HeaderDLQOriginalPrefix prefixes, on a dead letter, the headers of the
// source record that were named like eddy's own ("eddy.*"): forged, or
// left by an earlier dead letter of a record replayed from a dead-letter
// topic. Only eddy's headers carry eddy's names, so a reader of the dead
// letter gets the failure eddy saw; the source's, renamed
// "original.eddy.error" and so on, stay in the order they had.
const HeaderDLQOriginalPrefix = "original."

// ownHeaderPrefix is the prefix of the headers eddy writes on a dead letter.
const ownHeaderPrefix = "eddy."

// sourceHeaders returns the headers of a source record as a dead letter
// carries them: those named like eddy's renamed with
// HeaderDLQOriginalPrefix. It returns hs itself when none is.
func sourceHeaders(hs []kgo.RecordHeader) []kgo.RecordHeader {
	var out []kgo.RecordHeader
	for i, h := range hs {
		if !strings.HasPrefix(h.Key, ownHeaderPrefix) {
			if out != nil {
				out = append(out, h)
			}
			continue
		}
		if out == nil {
			out = append(make([]kgo.RecordHeader, 0, len(hs)), hs[:i]...)
		}
		out = append(out, kgo.RecordHeader{Key: HeaderDLQOriginalPrefix + h.Key, Value: h.Value})
	}
	if out == nil {
		return hs
	}
	return out
}

// deadLetterRecord is what a dead letter writes.
type deadLetterRecord struct {
	key, value []byte
	headers    []kgo.RecordHeader
	// cut lists what was truncated (HeaderDLQTruncated's value); empty
	// when the record is whole.
	cut string
}

// maxErrorHeader bounds the error text a dead letter carries, so that a
// long error cannot make the dead letter itself too large.
const maxErrorHeader = 1 << 10

// fitDeadLetter builds the dead letter of r, which failed at stage with
// errText, within limit bytes of key, value and headers (what
// runtime.CheckRecordSize counts). A dead letter that fits is r unchanged
// with the failure's headers after its own (those of its own named like
// eddy's renamed: sourceHeaders). One that does not keeps the
// failure's headers (the error text cut to half the room left if need
// be), adds the truncation headers, keeps r's headers if they still fit,
// and gives the rest of the room to a prefix of the key and of the value:
// the smaller whole if it takes at most half, otherwise half each. It fails
// only when limit cannot hold even the failure's and truncation's headers
// (a MaxRecordBytes of a few hundred bytes).
func fitDeadLetter(r *kgo.Record, stage, errText string, limit int) (deadLetterRecord, error) {
	src := sourceHeaders(r.Headers)
	failure := []kgo.RecordHeader{
		{Key: HeaderDLQError, Value: truncate(errText, maxErrorHeader)},
		{Key: HeaderDLQStage, Value: []byte(stage)},
		{Key: HeaderDLQTopic, Value: []byte(r.Topic)},
		{Key: HeaderDLQPartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		{Key: HeaderDLQOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
	}
	whole := append(append(make([]kgo.RecordHeader, 0, len(src)+len(failure)), src...), failure...)
	if len(r.Key)+len(r.Value)+headersSize(whole) <= limit {
		return deadLetterRecord{key: r.Key, value: r.Value, headers: whole}, nil
	}
	keySum, valueSum := sha256.Sum256(r.Key), sha256.Sum256(r.Value)
	marks := []kgo.RecordHeader{
		{Key: HeaderDLQKeySize, Value: strconv.AppendInt(nil, int64(len(r.Key)), 10)},
		{Key: HeaderDLQValueSize, Value: strconv.AppendInt(nil, int64(len(r.Value)), 10)},
		{Key: HeaderDLQKeySHA256, Value: []byte(hex.EncodeToString(keySum[:]))},
		{Key: HeaderDLQValueSHA256, Value: []byte(hex.EncodeToString(valueSum[:]))},
	}
	// Room for everything but the error text, whose cut is decided here,
	// and HeaderDLQTruncated's value, which takes at most this.
	const longestCut = len("headers,key,value")
	room := limit - headersSize(failure[1:]) - headersSize(marks) - len(HeaderDLQError) - len(HeaderDLQTruncated) - longestCut
	if room < 0 {
		return deadLetterRecord{}, fmt.Errorf("MaxRecordBytes (%d) leaves no room for the dead letter's own headers (%d bytes): raise it", limit, limit-room)
	}
	// The error text takes at most half the room: a small MaxRecordBytes
	// still shows some of the key and value.
	errValue := failure[0].Value
	if len(errValue) > room/2 {
		errValue = truncate(errText, room/2)
	}
	room -= len(errValue)

	var cut []string
	headers := make([]kgo.RecordHeader, 0, len(src)+len(failure)+len(marks)+1)
	if n := headersSize(src); n <= room {
		headers = append(headers, src...)
		room -= n
	} else if len(src) > 0 {
		cut = append(cut, "headers")
	}
	keyLen, valueLen := split(len(r.Key), len(r.Value), room)
	if keyLen < len(r.Key) {
		cut = append(cut, "key")
	}
	if valueLen < len(r.Value) {
		cut = append(cut, "value")
	}
	failure[0].Value = errValue
	headers = append(append(headers, failure...), marks...)
	dl := deadLetterRecord{key: r.Key[:keyLen], value: r.Value[:valueLen], cut: strings.Join(cut, ",")}
	dl.headers = append(headers, kgo.RecordHeader{Key: HeaderDLQTruncated, Value: []byte(dl.cut)})
	return dl, nil
}

// split shares room bytes between a key of k bytes and a value of v bytes:
// both whole if they fit; else the smaller whole if it takes at most half
// the room and the larger the rest; else half each.
func split(k, v, room int) (int, int) {
	switch {
	case k+v <= room:
		return k, v
	case k <= room/2:
		return k, room - k
	case v <= room/2:
		return room - v, v
	}
	return room / 2, room - room/2
}

// headersSize is what headers count towards a record's size.
func headersSize(headers []kgo.RecordHeader) int {
	n := 0
	for _, h := range headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// truncate cuts s to at most n bytes, ending a cut text with "...".
func truncate(s string, n int) []byte {
	switch {
	case len(s) <= n:
	case n < len("..."):
		s = s[:n]
	default:
		s = s[:n-3] + "..."
	}
	return []byte(s)
}
