package pgsink

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/eddy-streams/eddy/internal/testutil/registrytest"
	"github.com/eddy-streams/eddy/serde/registry"
)

// moneyProto is imported by ordersProto through a schema reference.
const moneyProto = `syntax = "proto3";
package eddy.test.sink;
message Money {
  string currency = 1;
  int64 units = 2;
}
`

// ordersProto's Order is its second message (message indexes [1], not
// the shortcut 0) and has a field of each kind ProtobufMapper maps.
const ordersProto = `syntax = "proto3";
package eddy.test.sink;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "money.proto";

message Other {
  string x = 1;
}

message Order {
  message Line {
    string sku = 1;
    int32 qty = 2;
  }
  string id = 1;
  int64 cents = 2;
  optional string note = 3;
  repeated Line lines = 4;
  map<string, string> tags = 5;
  Status status = 6;
  google.protobuf.Timestamp placed = 7;
  bytes blob = 8;
  oneof pay {
    string card = 9;
    Money cash = 10;
  }
  google.protobuf.Int64Value ceiling = 11;
}

enum Status {
  STATUS_UNKNOWN = 0;
  STATUS_OPEN = 1;
}
`

// orderDescriptor compiles ordersProto as a producer would, for building
// its messages without generated code.
func orderDescriptor(t *testing.T) protoreflect.MessageDescriptor {
	t.Helper()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"orders.proto": ordersProto, "money.proto": moneyProto}),
	})}
	files, err := c.Compile(context.Background(), "orders.proto")
	if err != nil {
		t.Fatal(err)
	}
	return files[0].Messages().ByName("Order")
}

// TestSinkProtobufMapper: Protobuf messages of a schema registered in
// eddy's registry with a reference to another file fill the table's
// columns by proto field name (unset fields with presence as NULL,
// enums by name, a Timestamp as timestamptz, bytes as bytea, nested
// messages, lists and maps as JSON); message indexes that name no
// message, a payload that does not decode and a value that is not framed
// are dead-lettered with the reason.
func TestSinkProtobufMapper(t *testing.T) {
	e := newEnv(t, "orders")
	exec(t, e.conn, `CREATE TABLE orders (id text PRIMARY KEY, cents bigint, note text, lines jsonb, tags jsonb, status text,
		placed timestamptz, blob bytea, card text, cash jsonb, ceiling bigint)`)
	url := registrytest.Start(t)
	reg := registryClient(t, url, 0, nil)
	ctx := context.Background()
	must(reg.Register(ctx, "money", sr.Schema{Schema: moneyProto, Type: sr.TypeProtobuf}))(t)
	id := must(reg.Register(ctx, "orders-value", sr.Schema{Schema: ordersProto, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "money.proto", Subject: "money", Version: 1}}}))(t)

	md := orderDescriptor(t)
	// frame is an Order (given as its JSON) in the Confluent wire format.
	frame := func(indexes []int64, orderJSON string) string {
		m := dynamicpb.NewMessage(md)
		if err := protojson.Unmarshal([]byte(orderJSON), m); err != nil {
			t.Fatal(err)
		}
		b := registry.AppendHeader(nil, id)
		b = binary.AppendVarint(b, int64(len(indexes)))
		for _, i := range indexes {
			b = binary.AppendVarint(b, i)
		}
		return string(must(proto.MarshalOptions{Deterministic: true}.MarshalAppend(b, m))(t))
	}
	order := []int64{1}
	e.produce(t, "orders",
		"o1", frame(order, `{"id": "o1", "cents": "150", "note": "fragile", "lines": [{"sku": "s1", "qty": 2}], "tags": {"gift": "yes"},
			"status": "STATUS_OPEN", "placed": "2024-05-06T07:08:09.500Z", "blob": "AQI=", "cash": {"currency": "EUR", "units": "3"}, "ceiling": "7"}`),
		"o2", frame(order, `{"id": "o2", "card": "visa"}`),
		"o3", frame(order, `{"id": "o3"}`), "o3", "<tombstone>",
		"nomsg", frame([]int64{5}, `{"id": "nomsg"}`),
		"garbage", string(append(registry.AppendHeader(nil, id), 2, 2, 0xff, 0xff)),
		"json", `{"id": "json"}`,
	)
	cfg := testConfig(e, "orders", "orders", Upsert, "id")
	cfg.Mapper = ProtobufMapper("id", registryClient(t, url, 0, nil))
	_, done := run(t, cfg)
	e.waitWritten(t, cfg.Group, 7, done)
	exec(t, e.conn, "SET TimeZone = 'UTC'")
	want := []string{
		`id=o1,cents=150,note=fragile,lines=[{"qty": 2, "sku": "s1"}],tags={"gift": "yes"},status=STATUS_OPEN,` +
			`placed=2024-05-06 07:08:09.5+00,blob=\x0102,card=<nil>,cash={"units": "3", "currency": "EUR"},ceiling=7`,
		`id=o2,cents=0,note=<nil>,lines=[],tags={},status=STATUS_UNKNOWN,placed=<nil>,blob=\x,card=visa,cash=<nil>,ceiling=<nil>`,
	}
	if got := dump(t, e.conn, "orders", "id"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("table:\n got %q\nwant %q", got, want)
	}
	checkReasons(t, deadLetterReasons(t, e, "orders.dlq", 3), map[string]string{
		"nomsg":   "message index 5 (at depth 1) names no message",
		"garbage": "is not a eddy.test.sink.Order",
		"json":    "not the Confluent wire format",
	})
}
