package disk

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/internal/keys"
	"github.com/eddy-streams/eddy/state/internal/offsetcodec"
)

// mapEngine is an Engine on a map, counting its writes.
type mapEngine struct {
	kv     map[string][]byte
	writes int
	fail   error // returned by the next Write, which then writes nothing
}

func (m *mapEngine) Get(k []byte) ([]byte, bool, error) {
	v, ok := m.kv[string(k)]
	return bytes.Clone(v), ok, nil
}

func (m *mapEngine) Write(_ int, fn func(Writer) error) error {
	b := &mapBatch{}
	if err := fn(b); err != nil {
		return err
	}
	if m.fail != nil {
		return m.fail
	}
	for _, op := range b.ops {
		op(m.kv)
	}
	m.writes++
	return nil
}

type mapBatch struct{ ops []func(map[string][]byte) }

func (b *mapBatch) Set(k, v []byte) error {
	k, v = bytes.Clone(k), bytes.Clone(v)
	b.ops = append(b.ops, func(kv map[string][]byte) { kv[string(k)] = v })
	return nil
}

func (b *mapBatch) Delete(k []byte) error {
	k = bytes.Clone(k)
	b.ops = append(b.ops, func(kv map[string][]byte) { delete(kv, string(k)) })
	return nil
}

func (b *mapBatch) DeleteRange(lo, hi []byte) error {
	lo, hi = bytes.Clone(lo), bytes.Clone(hi)
	b.ops = append(b.ops, func(kv map[string][]byte) {
		for k := range kv {
			if k >= string(lo) && k < string(hi) {
				delete(kv, k)
			}
		}
	})
	return nil
}

func sample() state.Offsets {
	o := state.NewOffsets()
	o.Input[state.TopicPartition{Topic: "in", Partition: 2}] = 42
	o.Changelog["s"] = 7
	o.StreamTime = 1000
	return o
}

func TestOpenNewDatabaseStampsFormat(t *testing.T) {
	e := &mapEngine{kv: map[string][]byte{}}
	o, err := Open(e, "/d")
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Input) != 0 || o.StreamTime != state.NoStreamTime {
		t.Fatalf("offsets of a new database = %v; want none", o)
	}
	if f, err := ReadFormat(e); err != nil || f != FormatNewest {
		t.Fatalf("format after Open = %d, %v; want %d", f, err, FormatNewest)
	}
	// A second Open finds the current format and writes nothing.
	if _, err := Open(e, "/d"); err != nil || e.writes != 1 {
		t.Fatalf("second Open: %v, %d writes; want 1 write in all", err, e.writes)
	}
}

func TestOpenMigratesFormat1(t *testing.T) {
	meta := offsetcodec.Append(nil, sample())
	e := &mapEngine{kv: map[string][]byte{"m": meta, string(keys.Append(nil, "s", []byte("k"))): []byte("v")}}
	// Offsets as Open returns them, and the database as another Open
	// would find it: format 1 read-only first.
	if o, f, err := ReadOffsets(e, "/d"); err != nil || f != FormatV1 || o.Changelog["s"] != 7 {
		t.Fatalf("ReadOffsets of format 1 = %v, %d, %v", o, f, err)
	}
	if e.writes != 0 {
		t.Fatal("ReadOffsets wrote")
	}
	// A failed write leaves format 1 as it was.
	e.fail = errors.New("disk full")
	if _, err := Open(e, "/d"); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Open with a failing write: %v", err)
	}
	if _, ok := e.kv["m"]; !ok || len(e.kv) != 2 {
		t.Fatalf("after a failed migration: %q; want format 1 untouched", e.kv)
	}
	e.fail = nil
	o, err := Open(e, "/d")
	if err != nil {
		t.Fatal(err)
	}
	if o.Changelog["s"] != 7 || o.StreamTime != 1000 {
		t.Fatalf("migrated offsets = %v", o)
	}
	if v := e.kv["m"]; !bytes.Equal(v, V1Guard) {
		t.Errorf("format 1's key holds %x after the migration, want the guard %x", v, V1Guard)
	}
	if !bytes.Equal(e.kv[string(keys.Offsets())], meta) || !bytes.Equal(e.kv[string(keys.Format())], []byte{FormatV2}) {
		t.Errorf("after migration: %q", e.kv)
	}
	if e.writes != 1 {
		t.Errorf("%d writes; want the migration in one", e.writes)
	}
}

func TestOpenRefuses(t *testing.T) {
	for _, tt := range []struct {
		name   string
		format []byte
		want   error
		says   string
	}{
		{"newer", AppendFormat(nil, FormatNewest+1), state.ErrFormat, "newer than this eddy's"},
		{"zero", []byte{0}, state.ErrCorrupt, "not a format version"},
		{"truncated", []byte{0x80}, state.ErrCorrupt, "not a format version"},
		{"trailing", []byte{2, 0}, state.ErrCorrupt, "not a format version"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := &mapEngine{kv: map[string][]byte{string(keys.Format()): tt.format}}
			_, err := Open(e, "/d")
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("Open = %v; want %v saying %q", err, tt.want, tt.says)
			}
			if _, _, err := ReadOffsets(e, "/d"); !errors.Is(err, tt.want) {
				t.Fatalf("ReadOffsets = %v; want %v", err, tt.want)
			}
			if e.writes != 0 {
				t.Fatal("a refused database was written")
			}
		})
	}
	// Damaged format 1 offsets are not carried into format 2.
	e := &mapEngine{kv: map[string][]byte{"m": {offsetcodec.Version, 5, 1}}}
	if _, err := Open(e, "/d"); !errors.Is(err, state.ErrCorrupt) || e.writes != 0 {
		t.Fatalf("Open of damaged format 1 = %v, %d writes; want ErrCorrupt and none", err, e.writes)
	}
}

func TestEncode(t *testing.T) {
	e := &mapEngine{kv: map[string][]byte{}}
	var enc Encoder
	put := func(store, k string) []byte { return keys.Append(nil, store, []byte(k)) }
	e.kv[string(put("w", "a"))] = []byte("old")
	e.kv[string(put("wx", "a"))] = []byte("other store")
	b := &state.Batch{
		Ranges:  []state.DeleteRange{{Store: "w"}, {Store: "w", Lower: []byte("z"), Upper: []byte("a")}},
		Writes:  []state.Write{{Store: "w", Key: []byte("a"), Value: []byte("new")}, {Store: "w", Key: []byte("b"), Delete: true}},
		Offsets: sample(),
	}
	if err := enc.Copy(b); err != nil {
		t.Fatal(err)
	}
	if err := e.Write(enc.Size(), enc.Encode); err != nil {
		t.Fatal(err)
	}
	if got := string(e.kv[string(put("w", "a"))]); got != "new" {
		t.Errorf("w/a = %q; want the write to survive the range", got)
	}
	if got := string(e.kv[string(put("wx", "a"))]); got != "other store" {
		t.Errorf("wx/a = %q; want it out of w's range", got)
	}
	if o, err := offsetcodec.Decode(e.kv[string(keys.Offsets())]); err != nil || o.Changelog["s"] != 7 {
		t.Errorf("offsets = %v, %v", o, err)
	}
	err := enc.Copy(&state.Batch{Writes: []state.Write{{Store: "", Key: []byte("k")}}})
	if !errors.Is(err, state.ErrInvalidStoreName) {
		t.Errorf("empty store name: %v", err)
	}
	if err := enc.Copy(nil); err == nil {
		t.Error("nil batch accepted")
	}
}
