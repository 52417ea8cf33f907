package eddy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/runtime"
)

func header(hs []kgo.RecordHeader, key string) (string, bool) {
	for _, h := range hs {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// checkTruncated checks that dl is a truncated dead letter of r within
// limit: cut as want says, prefixes of the key and value, the sizes and
// hashes of the originals, the failure's headers.
func checkTruncated(t *testing.T, dl deadLetterRecord, r *kgo.Record, limit int, want string) {
	t.Helper()
	if err := runtime.CheckRecordSize("in.dlq", dl.key, dl.value, dl.headers, limit); err != nil {
		t.Fatalf("dead letter does not fit: %v", err)
	}
	if dl.cut != want {
		t.Errorf("cut %q, want %q", dl.cut, want)
	}
	if !bytes.HasPrefix(r.Key, dl.key) || !bytes.HasPrefix(r.Value, dl.value) {
		t.Errorf("key or value is not a prefix of the original")
	}
	for k, v := range map[string]string{
		HeaderDLQTruncated:   want,
		HeaderDLQKeySize:     strconv.Itoa(len(r.Key)),
		HeaderDLQValueSize:   strconv.Itoa(len(r.Value)),
		HeaderDLQKeySHA256:   sha(r.Key),
		HeaderDLQValueSHA256: sha(r.Value),
		HeaderDLQStage:       "decode",
		HeaderDLQTopic:       r.Topic,
		HeaderDLQPartition:   strconv.Itoa(int(r.Partition)),
		HeaderDLQOffset:      strconv.FormatInt(r.Offset, 10),
	} {
		if got, ok := header(dl.headers, k); !ok || got != v {
			t.Errorf("header %s = %q (present %v), want %q", k, got, ok, v)
		}
	}
	if _, ok := header(dl.headers, HeaderDLQError); !ok {
		t.Errorf("no %s header", HeaderDLQError)
	}
}

func TestFitDeadLetterKeepsWhatFits(t *testing.T) {
	r := &kgo.Record{Topic: "in", Partition: 3, Offset: 41, Key: []byte("k"), Value: []byte("not json"),
		Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("abc")}}}
	dl, err := fitDeadLetter(r, "decode", "value: bad", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if dl.cut != "" || string(dl.key) != "k" || string(dl.value) != "not json" {
		t.Fatalf("dead letter %q=%q cut %q, want the record unchanged", dl.key, dl.value, dl.cut)
	}
	want := []string{"trace=abc", "eddy.error=value: bad", "eddy.stage=decode", "eddy.topic=in", "eddy.partition=3", "eddy.offset=41"}
	var got []string
	for _, h := range dl.headers {
		got = append(got, h.Key+"="+string(h.Value))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("headers %v, want %v", got, want)
	}
}

// The poison pill: a value of 1,000,100 bytes is dead-lettered
// with its value cut, within MaxRecordBytes including the headers.
func TestFitDeadLetterCutsTheValue(t *testing.T) {
	value := bytes.Repeat([]byte("{"), 1_000_100)
	value[len(value)-1] = '!'
	r := &kgo.Record{Topic: "payments", Partition: 1, Offset: 3931, Key: []byte("acct-7"), Value: value,
		Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("abc")}}}
	dl, err := fitDeadLetter(r, "decode", "value: payment: invalid character", DefaultMaxRecordBytes)
	if err != nil {
		t.Fatal(err)
	}
	checkTruncated(t, dl, r, DefaultMaxRecordBytes, "value")
	if string(dl.key) != "acct-7" {
		t.Errorf("key %q, want it whole", dl.key)
	}
	if v, _ := header(dl.headers, "trace"); v != "abc" {
		t.Errorf("the record's own header was not kept: %v", dl.headers)
	}
	if n := len(dl.key) + len(dl.value) + headersSize(dl.headers); n < DefaultMaxRecordBytes-len("headers,key,value") {
		t.Errorf("dead letter of %d bytes: the value was cut more than needed", n)
	}
}

func TestFitDeadLetterCutsKeyAndValue(t *testing.T) {
	for _, c := range []struct {
		name             string
		key, value, hdrs int
		want             string
		keyLen           int // -1: half of what is left
	}{
		{"large key", 5000, 10, 0, "key", 0},
		{"both large", 5000, 6000, 0, "key,value", -1},
		{"large headers", 10, 10, 5000, "headers", 10},
		{"all large", 3000, 3000, 3000, "headers,key,value", -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &kgo.Record{Topic: "in", Key: bytes.Repeat([]byte("k"), c.key), Value: bytes.Repeat([]byte("v"), c.value)}
			if c.hdrs > 0 {
				r.Headers = []kgo.RecordHeader{{Key: "big", Value: bytes.Repeat([]byte("h"), c.hdrs)}}
			}
			const limit = 2000
			dl, err := fitDeadLetter(r, "decode", "value: bad", limit)
			if err != nil {
				t.Fatal(err)
			}
			checkTruncated(t, dl, r, limit, c.want)
			if _, kept := header(dl.headers, "big"); c.hdrs > 0 && kept == strings.Contains(c.want, "headers") {
				t.Errorf("the record's header kept %v, cut %q", kept, c.want)
			}
			switch {
			case c.keyLen >= 0 && len(dl.key) != c.keyLen && c.want != "key":
				t.Errorf("key of %d bytes, want %d", len(dl.key), c.keyLen)
			case c.keyLen < 0 && len(dl.value)-len(dl.key) > 1:
				t.Errorf("key %d and value %d bytes, want half each", len(dl.key), len(dl.value))
			case c.want == "key" && len(dl.value) != c.value:
				t.Errorf("value of %d bytes, want it whole (%d)", len(dl.value), c.value)
			}
		})
	}
}

// A long error text is cut too when MaxRecordBytes is small, and a limit
// that cannot hold the dead letter's own headers is an error, not a
// record over the limit.
func TestFitDeadLetterSmallLimits(t *testing.T) {
	r := &kgo.Record{Topic: "in", Key: []byte("key"), Value: bytes.Repeat([]byte("v"), 3000)}
	long := strings.Repeat("e", 5000)
	for _, limit := range []int{2000, 1000, 700} {
		dl, err := fitDeadLetter(r, "decode", long, limit)
		if err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		checkTruncated(t, dl, r, limit, "value")
		if e, _ := header(dl.headers, HeaderDLQError); !strings.HasSuffix(e, "...") || len(e) > maxErrorHeader {
			t.Errorf("limit %d: error header of %d bytes, want it cut", limit, len(e))
		}
	}
	if _, err := fitDeadLetter(r, "decode", "bad", 200); err == nil || !strings.Contains(err.Error(), "MaxRecordBytes (200)") {
		t.Fatalf("limit 200: error %v, want one naming MaxRecordBytes", err)
	}
}

func TestSplit(t *testing.T) {
	for _, c := range []struct{ k, v, room, wk, wv int }{
		{10, 10, 100, 10, 10},
		{10, 200, 100, 10, 90},
		{200, 10, 100, 90, 10},
		{200, 200, 101, 50, 51},
		{60, 60, 100, 50, 50},
		{5, 5, 0, 0, 0},
	} {
		if k, v := split(c.k, c.v, c.room); k != c.wk || v != c.wv {
			t.Errorf("split(%d, %d, %d) = %d, %d; want %d, %d", c.k, c.v, c.room, k, v, c.wk, c.wv)
		}
	}
}

// The source record's own eddy.* headers are renamed original.eddy.*, in
// their order, so that only eddy's carry eddy's names; others stay as they
// are, and a record without any keeps its headers as they are.
func TestFitDeadLetterRenamesEddyHeaders(t *testing.T) {
	r := &kgo.Record{Topic: "in", Partition: 0, Offset: 7, Key: []byte("k"), Value: []byte("v"),
		Headers: []kgo.RecordHeader{
			{Key: "trace", Value: []byte("abc")},
			{Key: HeaderDLQError, Value: []byte("forged")},
			{Key: HeaderDLQTruncated, Value: []byte("key")},
			{Key: HeaderDLQOriginalPrefix + HeaderDLQError, Value: []byte("older")},
		}}
	want := []string{"trace=abc", "original.eddy.error=forged", "original.eddy.truncated=key", "original.eddy.error=older",
		"eddy.error=value: bad", "eddy.stage=decode", "eddy.topic=in", "eddy.partition=0", "eddy.offset=7"}
	dl, err := fitDeadLetter(r, "decode", "value: bad", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range dl.headers {
		got = append(got, h.Key+"="+string(h.Value))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("headers %v, want %v", got, want)
	}
	if r.Headers[1].Key != HeaderDLQError {
		t.Fatal("the source record's headers were changed")
	}

	// Truncated, it has one eddy.truncated, eddy's.
	r.Value = bytes.Repeat([]byte("z"), 2000)
	dl, err = fitDeadLetter(r, "decode", "value: bad", 1000)
	if err != nil {
		t.Fatal(err)
	}
	checkTruncated(t, dl, r, 1000, "value")
	n := 0
	for _, h := range dl.headers {
		if h.Key == HeaderDLQTruncated {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d %s headers, want 1: %v", n, HeaderDLQTruncated, dl.headers)
	}

	plain := []kgo.RecordHeader{{Key: "trace", Value: []byte("abc")}, {Key: "eddy", Value: []byte("not a prefix")}}
	if got := sourceHeaders(plain); len(got) != 2 || &got[0] != &plain[0] {
		t.Fatalf("sourceHeaders(%v) = %v, want the same headers", plain, got)
	}
}
