package avro_test

import (
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/serde/avro"
	"github.com/eddy-streams/eddy/serde/registry"
)

const orderSchema = `{"type":"record","name":"Order","fields":[
	{"name":"id","type":"string"},
	{"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line","fields":[
		{"name":"sku","type":"string"},{"name":"qty","type":"int"}]}}},
	{"name":"tags","type":{"type":"map","values":"string"}},
	{"name":"note","type":["null","string"],"default":null},
	{"name":"price","type":"double"}]}`

type orderLine struct {
	SKU string `avro:"sku"`
	Qty int32  `avro:"qty"`
}

type order struct {
	ID    string            `avro:"id"`
	Lines []orderLine       `avro:"lines"`
	Tags  map[string]string `avro:"tags"`
	Note  *string           `avro:"note"`
	Price float64           `avro:"price"`
}

// FuzzDeserialize: whatever the bytes after a valid header, Deserialize
// (into a struct and into a map) returns a value or an "eddy: avro:"
// error; it never panics, hangs or runs out of memory (the checked-in
// corpus holds a 10-byte record claiming 2^31 array items).
func FuzzDeserialize(f *testing.F) {
	reg := newClient(f, newFakeTB(f).URL(), registry.Config{})
	s := must(avro.Value[order](reg, "orders", orderSchema))(f)
	generic := must(avro.Value[map[string]any](reg, "orders", orderSchema))(f)
	note := "gift"
	good := must(s.Serialize(nil, order{ID: "o1", Lines: []orderLine{{"a", 2}}, Tags: map[string]string{"k": "v"}, Note: &note, Price: 9.5}))(f)
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add(append(good[:5:5], 0xff, 0xff, 0xff, 0xff, 0x0f))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= 5 {
			copy(b, good[:5]) // the registered id: exercise the payload
		}
		if _, err := s.Deserialize(b); err != nil && !strings.HasPrefix(err.Error(), "eddy: avro: ") {
			t.Fatalf("error %q without the eddy: avro: prefix", err)
		}
		if _, err := generic.Deserialize(b); err != nil && !strings.HasPrefix(err.Error(), "eddy: avro: ") {
			t.Fatalf("generic: error %q without the eddy: avro: prefix", err)
		}
	})
}
