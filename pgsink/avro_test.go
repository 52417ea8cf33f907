package pgsink

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"strings"
	"testing"
	"time"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/testutil"
	"github.com/eddy-streams/eddy/internal/testutil/registrytest"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/avro"
	"github.com/eddy-streams/eddy/serde/registry"
)

// accountAvro has a field of each kind AvroMapper maps: a nullable
// union, logical types, bytes, an enum, an array, a map and a nested
// record.
const accountAvro = `{"type":"record","name":"Account","namespace":"eddy.test","fields":[
	{"name":"account","type":"string"},
	{"name":"balance","type":"long"},
	{"name":"note","type":["null","string"],"default":null},
	{"name":"opened","type":{"type":"long","logicalType":"timestamp-millis"}},
	{"name":"born","type":{"type":"int","logicalType":"date"}},
	{"name":"rate","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":3}},
	{"name":"photo","type":"bytes"},
	{"name":"kind","type":{"type":"enum","name":"Kind","symbols":["SAVINGS","CHECKING"]}},
	{"name":"tags","type":{"type":"array","items":"string"}},
	{"name":"limits","type":{"type":"map","values":"long"}},
	{"name":"owner","type":["null",{"type":"record","name":"Owner","fields":[
		{"name":"name","type":"string"},{"name":"since","type":["null","long"]}]}]}]}`

type account struct {
	Account string           `avro:"account"`
	Balance int64            `avro:"balance"`
	Note    *string          `avro:"note"`
	Opened  time.Time        `avro:"opened"`
	Born    time.Time        `avro:"born"`
	Rate    *big.Rat         `avro:"rate"`
	Photo   []byte           `avro:"photo"`
	Kind    string           `avro:"kind"`
	Tags    []string         `avro:"tags"`
	Limits  map[string]int64 `avro:"limits"`
	Owner   *owner           `avro:"owner"`
}

type owner struct {
	Name  string `avro:"name"`
	Since *int64 `avro:"since"`
}

const accountsTable = `CREATE TABLE accounts (account text PRIMARY KEY, balance bigint, note text,
	opened timestamptz, born date, rate numeric(9,3), photo bytea, kind text, tags jsonb, limits jsonb, owner jsonb)`

// registryClient is a client of the registry at url that retries for
// timeout (0: the default) and logs to log (nil: nowhere).
func registryClient(t *testing.T, url string, timeout time.Duration, log io.Writer) *registry.Client {
	t.Helper()
	if log == nil {
		log = io.Discard
	}
	c, err := registry.New(registry.Config{URLs: []string{url}, Timeout: timeout, Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// must returns v, or fails the test given to it with err.
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// deadLetterReasons is the dead letters of topic by record key: their
// eddy.error headers, of n records.
func deadLetterReasons(t *testing.T, e *env, topic string, n int) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, r := range consumeAll(t, e, topic, n) {
		for _, h := range r.Headers {
			if h.Key == eddy.HeaderDLQError {
				got[string(r.Key)] = string(h.Value)
			}
		}
	}
	return got
}

// checkReasons fails unless each dead letter's reason contains want's
// text for its key, and every key of want has one.
func checkReasons(t *testing.T, got, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if !strings.Contains(got[k], w) {
			t.Errorf("dead letter %q: reason %q, want it to contain %q", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("dead letters %v, want one for each of %v", got, want)
	}
}

// TestSinkAvroMapper: Avro records written by eddy's Avro serde through
// eddy's registry fill the table's columns field by field (a union's
// null as NULL, logical types as their columns read them, nested values
// as JSON); a tombstone deletes; a value that is not framed, names an
// unknown schema id or a schema that is not a record, or does not decode
// is dead-lettered with the reason.
func TestSinkAvroMapper(t *testing.T) {
	e := newEnv(t, "accounts")
	exec(t, e.conn, accountsTable)
	url := registrytest.Start(t)
	reg := registryClient(t, url, 0, nil)
	s := must(avro.Value[account](reg, "accounts", accountAvro))(t)
	since := int64(2019)
	note := "vip"
	opened := time.Date(2024, 5, 6, 7, 8, 9, 500e6, time.UTC)
	born := time.Date(1990, 2, 3, 0, 0, 0, 0, time.UTC)
	full := must(s.Serialize(nil, account{Account: "a1", Balance: 150, Note: &note, Opened: opened, Born: born,
		Rate: big.NewRat(5, 4), Photo: []byte{1, 2}, Kind: "CHECKING", Tags: []string{"x", "<y>"},
		Limits: map[string]int64{"day": 10}, Owner: &owner{Name: "ann", Since: &since}}))(t)
	bare := must(s.Serialize(nil, account{Account: "a2", Balance: -3, Opened: opened, Born: born, Rate: big.NewRat(-1, 1000), Kind: "SAVINGS"}))(t)
	gone := must(s.Serialize(nil, account{Account: "a3", Opened: opened, Born: born, Rate: new(big.Rat), Kind: "SAVINGS"}))(t)
	strID := must(reg.Register(context.Background(), "strings-value", sr.Schema{Schema: `"string"`}))(t)
	notRecord := append(registry.AppendHeader(nil, strID), 2, 'h')
	unknownID := append(registry.AppendHeader(nil, 999999), full[registry.HeaderSize:]...)
	e.produce(t, "accounts",
		"a1", string(full), "a2", string(bare), "a3", string(gone), "a3", "<tombstone>",
		"json", `{"account": "json", "balance": 1}`,
		"unknown", string(unknownID),
		"short", string(full[:len(full)-4]),
		"long", string(append(append([]byte(nil), bare...), 0)),
		"str", string(notRecord),
	)
	cfg := testConfig(e, "accounts", "accounts", Upsert, "account")
	cfg.Mapper = AvroMapper("account", registryClient(t, url, 0, nil))
	_, done := run(t, cfg)
	e.waitWritten(t, cfg.Group, 9, done)
	exec(t, e.conn, "SET TimeZone = 'UTC'")
	want := []string{
		`account=a1,balance=150,note=vip,opened=2024-05-06 07:08:09.5+00,born=1990-02-03,rate=1.250,photo=\x0102,kind=CHECKING,` +
			`tags=["x", "<y>"],limits={"day": 10},owner={"name": "ann", "since": 2019}`,
		`account=a2,balance=-3,note=<nil>,opened=2024-05-06 07:08:09.5+00,born=1990-02-03,rate=-0.001,photo=\x,kind=SAVINGS,` +
			`tags=[],limits={},owner=<nil>`,
	}
	if got := dump(t, e.conn, "accounts", "account"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("table:\n got %q\nwant %q", got, want)
	}
	checkReasons(t, deadLetterReasons(t, e, "accounts.dlq", 5), map[string]string{
		"json":    "not the Confluent wire format",
		"unknown": "writer schema id 999999 unknown to the registry",
		"short":   "does not match writer schema id",
		"long":    "longer than writer schema id",
		"str":     "not a record",
	})
}

// TestSinkAvroReferences: a writer schema whose field's type is a record
// of another schema, registered under its own subject and referenced:
// the mapper parses the referenced schema first.
func TestSinkAvroReferences(t *testing.T) {
	e := newEnv(t, "payments")
	exec(t, e.conn, "CREATE TABLE payments (id text PRIMARY KEY, amount jsonb)")
	url := registrytest.Start(t)
	reg := registryClient(t, url, 0, nil)
	ctx := context.Background()
	const money = `{"type":"record","name":"Money","namespace":"eddy.test","fields":[{"name":"currency","type":"string"},{"name":"cents","type":"long"}]}`
	const payment = `{"type":"record","name":"Payment","namespace":"eddy.test","fields":[{"name":"amount","type":"eddy.test.Money"}]}`
	must(reg.Register(ctx, "money", sr.Schema{Schema: money}))(t)
	id := must(reg.Register(ctx, "payments-value", sr.Schema{Schema: payment,
		References: []sr.SchemaReference{{Name: "eddy.test.Money", Subject: "money", Version: 1}}}))(t)
	// Money's fields: "EUR" (length 3 zig-zag, the bytes), 250 cents.
	value := append(registry.AppendHeader(nil, id), 6, 'E', 'U', 'R', 0xf4, 0x03)
	e.produce(t, "payments", "p1", string(value))
	cfg := testConfig(e, "payments", "payments", Upsert, "id")
	cfg.Mapper = AvroMapper("id", registryClient(t, url, 0, nil))
	_, done := run(t, cfg)
	e.waitWritten(t, cfg.Group, 1, done)
	if got := dump(t, e.conn, "payments", "id"); fmt.Sprint(got) != `[id=p1,amount={"cents": 250, "currency": "EUR"}]` {
		t.Fatalf("table = %q", got)
	}
}

// TestSinkRegistryDown: with the registry unreachable for longer than
// its client's Timeout, the Avro and the Protobuf mappers blame no
// record: the sink logs its retries, then stops with an error wrapping
// serde.ErrUnavailable, having dead-lettered and written nothing; the
// rest of the batch does not each wait the retry bound again.
func TestSinkRegistryDown(t *testing.T) {
	e := newEnv(t, "down")
	exec(t, e.conn, "CREATE TABLE down (account text PRIMARY KEY, balance bigint)")
	// Framed records whose schema id the down registry would hold.
	var kv []string
	for i := range 40 {
		kv = append(kv, fmt.Sprint("a", i), string(append(registry.AppendHeader(nil, 1), 0, 2)))
	}
	e.produce(t, "down", kv...)
	for name, mapper := range map[string]func(string, *registry.Client) Mapper{"avro": AvroMapper, "protobuf": ProtobufMapper} {
		logs := &testutil.LogBuffer{}
		cfg := testConfig(e, "down", "down", Upsert, "account")
		cfg.Group = "g-down-" + name
		cfg.Mapper = mapper("account", registryClient(t, registrytest.ClosedURL(t), 500*time.Millisecond, logs))
		_, done := run(t, cfg)
		select {
		case err := <-done:
			if !errors.Is(err, serde.ErrUnavailable) || !strings.HasPrefix(err.Error(), "eddy: pgsink: record down/") {
				t.Fatalf("%s: Run = %v, want an error naming the record, wrapping serde.ErrUnavailable", name, err)
			}
			t.Logf("%s: %v", name, err)
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: Run went on with the registry down", name)
		}
		// Each request to the registry logs its first failure: the
		// records did not each wait the retry bound (40 of them would
		// hold the sink for 20s).
		if n := strings.Count(logs.String(), "schema registry unavailable; retrying"); n == 0 || n >= 40 {
			t.Errorf("%s: %d requests retried for 40 records, want at least one and fewer than the records:\n%s", name, n, logs)
		}
		var written int64
		if err := e.conn.QueryRow(context.Background(), "SELECT coalesce(sum(next_offset), 0) FROM "+OffsetsTable+" WHERE group_id = $1", cfg.Group).Scan(&written); err != nil || written != 0 {
			t.Errorf("%s: offsets advanced to %d (%v), want 0", name, written, err)
		}
	}
	ends, err := kadm.NewClient(e.cl).ListEndOffsets(context.Background(), "down.dlq")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 {
			t.Errorf("down.dlq partition %d holds %d dead letters, want none", o.Partition, o.Offset)
		}
	})
	if n := len(ends); n == 0 {
		t.Error("no dead-letter topic to check")
	}
}

// TestSinkValueFieldsChecked: a field of the value schema that is not a
// column written stops Run at start, naming it.
func TestSinkValueFieldsChecked(t *testing.T) {
	e := newEnv(t, "accounts")
	exec(t, e.conn, "CREATE TABLE accts (account text PRIMARY KEY, balance bigint, note text)")
	fields := must(AvroFields(accountAvro))(t)
	if fmt.Sprint(fields) != "[account balance note opened born rate photo kind tags limits owner]" {
		t.Fatalf("AvroFields = %v", fields)
	}
	cfg := testConfig(e, "accounts", "accts", Upsert, "account")
	cfg.ValueFields = fields
	// Bounded: a sink that does not check would run until stopped.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Run(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), `table accts has no column "opened", "born", "rate", "photo", "kind", "tags", "limits", "owner" written`) {
		t.Fatalf("Run = %v", err)
	}
	// A column the table has but that is not written counts as missing.
	cfg.Table.Columns = []string{"account", "balance"}
	cfg.ValueFields = []string{"account", "balance", "note"}
	if err := Run(ctx, cfg); err == nil || !strings.Contains(err.Error(), `no column "note" written`) {
		t.Fatalf("Run with note not among the columns = %v", err)
	}
	if _, err := AvroFields(`"string"`); err == nil || !strings.Contains(err.Error(), "not a record") {
		t.Fatalf(`AvroFields("string") = %v`, err)
	}
}

// TestReadAvroBounds: a record that claims more array items than the
// bound, or nests deeper than it, is an error (the record's fault), not
// memory or stack spent on what it claims.
func TestReadAvroBounds(t *testing.T) {
	for _, c := range []struct {
		name, schema string
		payload      []byte
		want         string
	}{
		// One block claiming one item more than the bound, of nulls: no
		// bytes per item.
		{"items", `{"type":"array","items":"null"}`, binary.AppendVarint(nil, avroMaxItems+1), "more than 1000000 items claimed"},
		// A linked list 100 deep: each level's union picks the record.
		{"depth", `{"type":"record","name":"Node","fields":[{"name":"next","type":["null","Node"]}]}`, bytes.Repeat([]byte{2}, 100), "values nest deeper than 64"},
	} {
		s := must(hamba.ParseWithCache(c.schema, "", &hamba.SchemaCache{}))(t)
		r := hamba.NewReader(nil, 0)
		r.Reset(c.payload)
		readAvro(r, s, 0)
		if r.Error == nil || !strings.Contains(r.Error.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, r.Error, c.want)
		}
	}
}
