package pgsink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/testutil/apprun"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/internal/testutil"
	"github.com/eddy-streams/eddy/internal/testutil/pgtest"
	"github.com/eddy-streams/eddy/serde"
)

// env is a broker, a database and a producer for a sink test.
type env struct {
	broker *kafka.Broker
	pg     *pgtest.Cluster
	conn   *pgx.Conn
	cl     *kgo.Client
}

func newEnv(t *testing.T, topics ...string) *env { return newBenchEnv(t, topics...) }

func newBenchEnv(t testing.TB, topics ...string) *env {
	t.Helper()
	pg := pgtest.Start(t)
	b, err := kafka.StartBroker(kafka.BrokerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	apprun.CreateTopics(t, b.Addr(), 4, topics...)
	cl := apprun.Client(t, b.Addr())
	t.Cleanup(cl.Close)
	return &env{broker: b, pg: pg, conn: connect(t, pg.DSN()), cl: cl}
}

func (e *env) produce(t *testing.T, topic string, kv ...string) {
	t.Helper()
	var recs []*kgo.Record
	for i := 0; i < len(kv); i += 2 {
		r := &kgo.Record{Topic: topic, Key: []byte(kv[i])}
		if kv[i+1] != "<tombstone>" {
			r.Value = []byte(kv[i+1])
		}
		recs = append(recs, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// run starts Run in a goroutine; the returned func cancels it and
// returns its error.
func run(t *testing.T, cfg Config) (stop func() error, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	finished := make(chan struct{})
	var result error
	go func() {
		result = Run(ctx, cfg)
		close(finished)
		ch <- result
	}()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case <-finished:
				err = result
			case <-time.After(30 * time.Second):
				buf := make([]byte, 1<<20)
				err = fmt.Errorf("Run did not return 30s after its context was cancelled:\n%s", buf[:runtime.Stack(buf, true)])
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop, ch
}

// waitWritten waits until the group's stored offsets add up to n records:
// the sink has committed every record of the topic.
func (e *env) waitWritten(t *testing.T, group string, n int64, done <-chan error) {
	e.waitWrittenB(t, group, n, done)
}

func (e *env) waitWrittenB(t testing.TB, group string, n int64, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	var got int64
	for time.Now().Before(deadline) {
		err := e.conn.QueryRow(context.Background(), "SELECT coalesce(sum(next_offset), 0) FROM "+OffsetsTable+" WHERE group_id = $1", group).Scan(&got)
		if err == nil && got == n {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("the sink stopped at %d of %d records: %v", got, n, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("the sink wrote %d of %d records in 60s", got, n)
}

func testConfig(e *env, topic, table string, mode Mode, key ...string) Config {
	return Config{
		Brokers:   []string{e.broker.Addr()},
		Topic:     topic,
		Group:     "g-" + table,
		DSN:       e.pg.DSN(),
		Table:     Table{Name: table, Key: key, Mode: mode},
		BatchSize: 100,
		BatchWait: 20 * time.Millisecond,
		DBTimeout: 5 * time.Second,
		Logger:    slog.New(slog.NewTextHandler(&testutil.LogBuffer{}, nil)),
	}
}

// TestSinkUpsertResumes: the sink upserts by the record key (last per key
// wins, tombstones delete); a second instance after the first stopped
// carries on at the offsets stored in the database. To tell a resume from
// a replay (which upserts would hide), the rows the first instance wrote
// are marked (seq negated) and Kafka's committed offsets are reset to 0
// in between: the second half of the topic touches half the keys only, so
// a replay from 0, or from Kafka's committed offsets, overwrites marked
// rows and the table differs from the reference.
func TestSinkUpsertResumes(t *testing.T) {
	e := newEnv(t, "bal")
	exec(t, e.conn, "CREATE TABLE balances (account text PRIMARY KEY, balance bigint NOT NULL, seq bigint)")
	want := map[string][2]int{} // per account: balance, seq
	var kv []string
	apply := func(i, keys int) {
		acct := fmt.Sprintf("a%02d", i%keys)
		if i%97 == 0 {
			kv = append(kv, acct, "<tombstone>")
			delete(want, acct)
			return
		}
		kv = append(kv, acct, fmt.Sprintf(`{"balance": %d, "seq": %d}`, i*10, i))
		want[acct] = [2]int{i * 10, i}
	}
	for i := 0; i < 300; i++ {
		apply(i, 40)
	}
	e.produce(t, "bal", kv...)
	cfg := testConfig(e, "bal", "balances", Upsert, "account")
	stop, done := run(t, cfg)
	e.waitWritten(t, cfg.Group, 300, done)
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	exec(t, e.conn, "UPDATE balances SET seq = -seq")
	for a, v := range want {
		want[a] = [2]int{v[0], -v[1]}
	}
	adm := kadm.NewClient(e.cl)
	offs := kadm.Offsets{}
	for p := int32(0); p < 4; p++ {
		offs.AddOffset("bal", p, 0, -1)
	}
	if resp, err := adm.CommitOffsets(context.Background(), cfg.Group, offs); err != nil || resp.Error() != nil {
		t.Fatalf("reset Kafka's committed offsets: %v %v", err, resp.Error())
	}

	kv = kv[:0]
	for i := 300; i < 600; i++ {
		apply(i, 20) // a00..a19: a20..a39 keep their marked rows
	}
	e.produce(t, "bal", kv...)
	_, done = run(t, cfg)
	e.waitWritten(t, cfg.Group, 600, done)
	var wantRows []string
	for a, v := range want {
		wantRows = append(wantRows, fmt.Sprintf("account=%s,balance=%d,seq=%d", a, v[0], v[1]))
	}
	slicesSort(wantRows)
	got := dump(t, e.conn, "balances", "account")
	if fmt.Sprint(got) != fmt.Sprint(wantRows) {
		t.Fatalf("table:\n got %q\nwant %q", got, wantRows)
	}
}

// TestSinkClaimAndSkip: the two defences of a resume, each on its own
// (TestSinkUpsertResumes needs only one of them to pass). A claim raises
// each partition's epoch and seeks to the next offset stored in the
// database (0 for a new partition); a batch skips its records below the
// stored offset (fetched again after a commit whose answer was lost).
func TestSinkClaimAndSkip(t *testing.T) {
	pg := pgtest.Start(t)
	conn := connect(t, pg.DSN())
	ctx := context.Background()
	exec(t, conn, createOffsetsTable)
	exec(t, conn, "CREATE TABLE kv (k text PRIMARY KEY, v bigint)")
	exec(t, conn, "INSERT INTO "+OffsetsTable+" VALUES ('g', 't', 0, 5, 3)")
	log := slog.New(slog.NewTextHandler(&testutil.LogBuffer{}, nil))
	cfg := Config{Topic: "t", Group: "g", Mapper: JSONMapper("k")}
	w, err := NewWriter(ctx, conn, Table{Name: "kv", Key: []string{"k"}})
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{cfg: cfg, log: log, w: w, epochs: map[int32]int64{}, cancel: func() {},
		claims: &db{dsn: pg.DSN(), timeout: 5 * time.Second, log: log}}
	t.Cleanup(s.claims.close)

	got, err := s.claim(ctx, map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset(), 1: kgo.NewOffset()}})
	if err != nil {
		t.Fatal(err)
	}
	if o0, o1 := got["t"][0].EpochOffset().Offset, got["t"][1].EpochOffset().Offset; o0 != 5 || o1 != 0 {
		t.Errorf("claim seeks to %d and %d, want the stored 5 and 0", o0, o1)
	}
	if fmt.Sprint(s.epochs) != "map[0:4 1:1]" {
		t.Errorf("epochs after the claim = %v, want map[0:4 1:1]", s.epochs)
	}

	var recs []*kgo.Record
	for o := int64(3); o < 7; o++ {
		recs = append(recs, &kgo.Record{Topic: "t", Partition: 0, Offset: o, Key: []byte(fmt.Sprintf("k%d", o)), Value: []byte(fmt.Sprintf(`{"v": %d}`, o))})
	}
	next, err := s.write(ctx, conn, s.mapRecords(recs, map[int32]int64{0: 4}))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(next) != "map[0:7]" {
		t.Errorf("next offsets = %v, want map[0:7]", next)
	}
	if got := dump(t, conn, "kv", "k"); fmt.Sprint(got) != "[k=k5,v=5 k=k6,v=6]" {
		t.Errorf("table = %q, want only the records from the stored offset 5", got)
	}
}

// TestSinkAppendExactlyOnce: in append mode every record is one row, none
// twice, across a sink stopped mid-stream and restarted (at a stored
// offset past 0: a replay would duplicate rows), and across the database
// killed (pg_ctl stop -m immediate) and restarted under a running sink
// that had records to write meanwhile (it logged the failure). No sleep
// decides an outcome: a stop or a kill that happens to fall between
// batches tests the same properties.
func TestSinkAppendExactlyOnce(t *testing.T) {
	e := newEnv(t, "pay")
	exec(t, e.conn, "CREATE TABLE payments (account text, seq bigint, amount bigint)")
	cfg := testConfig(e, "pay", "payments", Append)
	cfg.Mapper = JSONMapper("account")
	cfg.DBTimeout = time.Minute // the database's restart must not end the sink
	logs := &testutil.LogBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	batch := func(from, n int) []string {
		var kv []string
		for i := from; i < from+n; i++ {
			kv = append(kv, fmt.Sprintf("a%d", i%13), fmt.Sprintf(`{"seq": %d, "amount": %d}`, i, i%7))
		}
		return kv
	}
	stop, done := run(t, cfg)
	e.produce(t, "pay", batch(0, 1000)...)
	e.waitWritten(t, cfg.Group, 1000, done)
	e.produce(t, "pay", batch(1000, 1000)...)
	if err := stop(); err != nil { // while it writes, usually
		t.Fatal(err)
	}
	_, done = run(t, cfg)
	e.waitWritten(t, cfg.Group, 2000, done)

	// The database crashes under the running sink, records flowing.
	kv := batch(2000, 1000)
	for i := 0; i < len(kv); i += 2 {
		e.cl.Produce(context.Background(), &kgo.Record{Topic: "pay", Key: []byte(kv[i]), Value: []byte(kv[i+1])}, nil)
	}
	if err := e.pg.Kill(); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.cl.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "database unavailable, retrying") {
		if time.Now().After(deadline) {
			t.Fatalf("the sink did not meet the database down:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := e.pg.Start(); err != nil {
		t.Fatal(err)
	}
	e.produce(t, "pay", batch(3000, 1000)...)
	e.conn = connect(t, e.pg.DSN())
	e.waitWritten(t, cfg.Group, 4000, done)
	var rows, distinct, lo, hi int64
	if err := e.conn.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT seq), min(seq), max(seq) FROM payments").Scan(&rows, &distinct, &lo, &hi); err != nil {
		t.Fatal(err)
	}
	if rows != 4000 || distinct != 4000 || lo != 0 || hi != 3999 {
		t.Fatalf("payments: %d rows, %d distinct seqs in [%d, %d]; want 4000 of each in [0, 3999]", rows, distinct, lo, hi)
	}
}

// TestSinkDeadLetters: records that do not decode, do not map to the
// table or break a constraint go to the dead-letter topic with their
// reason; the rest of their batch is written. Under Stop the first stops
// the sink with an error naming it, and nothing of its batch is written.
func TestSinkDeadLetters(t *testing.T) {
	e := newEnv(t, "in")
	exec(t, e.conn, "CREATE TABLE acc (account text PRIMARY KEY, balance bigint NOT NULL CHECK (balance >= 0))")
	e.produce(t, "in",
		"a", `{"balance": 1}`,
		"b", `not json`,
		"c", `{"balance": 3, "colour": "red"}`,
		"d", `{"balance": -4}`,
		"e", `{"balance": "five"}`,
		"f", `{"balance": 6}`,
	)
	cfg := testConfig(e, "in", "acc", Upsert, "account")
	_, done := run(t, cfg)
	e.waitWritten(t, cfg.Group, 6, done)
	if got := dump(t, e.conn, "acc", "account"); fmt.Sprint(got) != "[account=a,balance=1 account=f,balance=6]" {
		t.Fatalf("table = %q", got)
	}
	dl := consumeAll(t, e, "in.dlq", 4)
	want := map[string]string{"b": "not a JSON object", "c": `no column "colour"`, "d": "violates check constraint", "e": "invalid input syntax for type bigint"}
	for _, r := range dl {
		h := map[string]string{}
		for _, x := range r.Headers {
			h[x.Key] = string(x.Value)
		}
		k := string(r.Key)
		if !strings.Contains(h[eddy.HeaderDLQError], want[k]) || want[k] == "" || h[eddy.HeaderDLQStage] != "sink" ||
			h[eddy.HeaderDLQTopic] != "in" || h[eddy.HeaderDLQOffset] == "" || h[eddy.HeaderDLQPartition] == "" {
			t.Errorf("dead letter %s: headers %v, want the error to contain %q", k, h, want[k])
		}
		delete(want, k)
	}
	if len(want) > 0 {
		t.Errorf("no dead letter for %v", want)
	}

	// Stop: the sink returns the record's error and writes nothing.
	exec(t, e.conn, "CREATE TABLE acc2 (account text PRIMARY KEY, balance bigint NOT NULL CHECK (balance >= 0))")
	cfg = testConfig(e, "in", "acc2", Upsert, "account")
	cfg.OnBadRecord = Stop
	_, done = run(t, cfg)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "in/") || !strings.HasPrefix(err.Error(), "eddy: pgsink: record") {
			t.Fatalf("Run under Stop: %v, want the bad record's error", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run under Stop did not stop on a bad record")
	}
	var n int
	if err := e.conn.QueryRow(context.Background(), "SELECT count(*) FROM acc2").Scan(&n); err != nil || n != 0 {
		t.Fatalf("acc2 has %d rows (%v) after a stop, want 0", n, err)
	}
}

// TestSinkKeysEqualAsValues: records whose keys are one uuid written in
// two cases are one key: the last wins, and it may be a delete (a batch's
// deletes used to run before its upserts, keeping a row deleted after
// it). Under Stop, a record blamed for a pair would stop the sink. (A
// pair of upserts alone was written right before the fix too, row by
// row, after the batch failed.)
func TestSinkKeysEqualAsValues(t *testing.T) {
	e := newEnv(t, "ids")
	exec(t, e.conn, "CREATE TABLE ids (id uuid PRIMARY KEY, v text)")
	cfg := testConfig(e, "ids", "ids", Upsert, "id")
	// The id from the value (one record key: one partition, in order);
	// a value "delete <id>" deletes it.
	json := JSONMapper("")
	cfg.Mapper = func(key, value []byte) (Row, error) {
		if id, ok := strings.CutPrefix(string(value), "delete "); ok {
			return Row{Delete: true, Values: map[string]any{"id": id}}, nil
		}
		return json(key, value)
	}
	cfg.OnBadRecord = Stop
	e.produce(t, "ids",
		"same", `{"id": "B0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "v": "kept"}`,
		"same", `{"id": "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "v": "first"}`,
		"same", `delete a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11`,
	)
	_, done := run(t, cfg)
	e.waitWritten(t, cfg.Group, 3, done)
	e.produce(t, "ids",
		"same", `{"id": "b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "v": "second"}`,
		"same", `{"id": "B0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "v": "last"}`,
	)
	e.waitWritten(t, cfg.Group, 5, done)
	if got := dump(t, e.conn, "ids", "id"); fmt.Sprint(got) != "[id=b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,v=last]" {
		t.Fatalf("table = %q", got)
	}
}

// TestSinkDeferredConstraint: a row that breaks a DEFERRABLE INITIALLY
// DEFERRED foreign key is found at its row (the sink checks constraints
// immediately), dead-lettered, and the rest of its batch written.
func TestSinkDeferredConstraint(t *testing.T) {
	e := newEnv(t, "orders")
	exec(t, e.conn, "CREATE TABLE customers (id text PRIMARY KEY)")
	exec(t, e.conn, "INSERT INTO customers VALUES ('c1')")
	exec(t, e.conn, "CREATE TABLE orders (id text PRIMARY KEY, customer text REFERENCES customers DEFERRABLE INITIALLY DEFERRED)")
	e.produce(t, "orders", "o1", `{"customer": "c1"}`, "o2", `{"customer": "nobody"}`, "o3", `{"customer": "c1"}`)
	cfg := testConfig(e, "orders", "orders", Upsert, "id")
	_, done := run(t, cfg)
	e.waitWritten(t, cfg.Group, 3, done)
	if got := dump(t, e.conn, "orders", "id"); fmt.Sprint(got) != "[id=o1,customer=c1 id=o3,customer=c1]" {
		t.Fatalf("table = %q", got)
	}
	dl := consumeAll(t, e, "orders.dlq", 1)
	if string(dl[0].Key) != "o2" {
		t.Fatalf("dead letter for %q, want o2", dl[0].Key)
	}
}

func consumeAll(t *testing.T, e *env, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.broker.Addr()), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n && ctx.Err() == nil {
		out = append(out, cl.PollFetches(ctx).Records()...)
	}
	if len(out) != n {
		t.Fatalf("%s: %d records, want %d", topic, len(out), n)
	}
	return out
}

// TestSinkDatabaseUnreachable: a database that cannot be reached, or that
// refuses the connection (no such database), stops Run with a clear error
// after DBTimeout, having retried meanwhile; it is not blamed on a record.
func TestSinkDatabaseUnreachable(t *testing.T) {
	e := newEnv(t, "x")
	for _, dsn := range []string{
		"postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2",
		strings.Replace(e.pg.DSN(), "/postgres?", "/nosuchdb?", 1),
		strings.Replace(e.pg.DSN(), "postgres@", "nosuchuser@", 1), // refused credentials
	} {
		cfg := testConfig(e, "x", "t", Upsert, "k")
		cfg.DSN = dsn
		cfg.DBTimeout = 2 * time.Second
		logs := &testutil.LogBuffer{}
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
		err := Run(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), "the database failed for") || !strings.HasPrefix(err.Error(), "eddy: pgsink:") {
			t.Errorf("%s: Run = %v, want the database's error after the bound", dsn, err)
		}
		if !strings.Contains(logs.String(), "retrying") {
			t.Errorf("%s: no retry logged:\n%s", dsn, logs)
		}
	}
}

// TestSinkMappingValidated: a table that does not fit stops Run at start
// with an error naming the column, without retrying.
func TestSinkMappingValidated(t *testing.T) {
	e := newEnv(t, "x")
	exec(t, e.conn, "CREATE TABLE t (k text PRIMARY KEY, v bigint)")
	cfg := testConfig(e, "x", "t", Upsert, "key")
	err := Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), `table t has no column "key"`) {
		t.Fatalf("Run = %v", err)
	}
}

func slicesSort(s []string) { sort.Strings(s) }

// TestSinkFencedByEpoch: once another owner has raised a partition's
// epoch in the database, an instance that still believes it owns the
// partition writes none of its records (the offsets alone would not stop
// it: nobody advanced them).
func TestSinkFencedByEpoch(t *testing.T) {
	e := newEnv(t, "f")
	exec(t, e.conn, "CREATE TABLE f (k text PRIMARY KEY, v bigint)")
	cfg := testConfig(e, "f", "f", Upsert, "k")
	logs := &testutil.LogBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	stop, done := run(t, cfg)
	e.produce(t, "f", "a", `{"v": 1}`, "b", `{"v": 2}`, "c", `{"v": 3}`, "d", `{"v": 4}`)
	e.waitWritten(t, cfg.Group, 4, done)
	// Another owner takes every partition (as a successor's claim does).
	exec(t, e.conn, "UPDATE "+OffsetsTable+" SET epoch = epoch + 1 WHERE group_id = $1", cfg.Group)
	e.produce(t, "f", "a", `{"v": 10}`, "b", `{"v": 20}`, "c", `{"v": 30}`, "d", `{"v": 40}`)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "fenced") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "fenced") {
		t.Fatalf("no fencing logged:\n%s", logs)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, e.conn, "f", "k"); fmt.Sprint(got) != "[k=a,v=1 k=b,v=2 k=c,v=3 k=d,v=4]" {
		t.Fatalf("a fenced instance wrote: %q", got)
	}
	var n int64
	if err := e.conn.QueryRow(context.Background(), "SELECT sum(next_offset) FROM "+OffsetsTable+" WHERE group_id = $1", cfg.Group).Scan(&n); err != nil || n != 4 {
		t.Fatalf("offsets advanced to %d (%v) by a fenced instance, want 4", n, err)
	}
}

type typedBalance struct {
	Account string `json:"account"`
	Cents   int64  `json:"cents"`
}

// flakyRegistry is a serde whose registry is unreachable for the value
// "down": Deserialize fails wrapping serde.ErrUnavailable.
type flakyRegistry struct{ serde.Serde[typedBalance] }

func (f flakyRegistry) Deserialize(b []byte) (typedBalance, error) {
	if string(b) == "down" {
		return typedBalance{}, fmt.Errorf("registry: %w", serde.ErrUnavailable)
	}
	return f.Serde.Deserialize(b)
}

// TestSinkSerdeMapper: a serde's typed values fill the columns; a value it
// cannot decode is dead-lettered; a registry that is unreachable stops the
// sink with an error wrapping serde.ErrUnavailable, blaming no record.
func TestSinkSerdeMapper(t *testing.T) {
	e := newEnv(t, "typed")
	exec(t, e.conn, "CREATE TABLE typed (account text PRIMARY KEY, balance numeric)")
	s := flakyRegistry{serde.JSON[typedBalance]()}
	mp := SerdeMapper[typedBalance]("account", s, func(b typedBalance) map[string]any {
		return map[string]any{"balance": float64(b.Cents) / 100}
	})
	e.produce(t, "typed", "a", `{"cents": 150}`, "b", `{"cents": -5}`, "c", `[oops`, "a", `{"cents": 275}`)
	cfg := testConfig(e, "typed", "typed", Upsert, "account")
	cfg.Mapper = mp
	_, done := run(t, cfg)
	e.waitWritten(t, cfg.Group, 4, done)
	if got := dump(t, e.conn, "typed", "account"); fmt.Sprint(got) != "[account=a,balance=2.75 account=b,balance=-0.05]" {
		t.Fatalf("table = %q", got)
	}
	if dl := consumeAll(t, e, "typed.dlq", 1); string(dl[0].Key) != "c" {
		t.Fatalf("dead letter %q, want c's", dl[0].Key)
	}

	e.produce(t, "typed", "d", "down")
	select {
	case err := <-done:
		if !errors.Is(err, serde.ErrUnavailable) {
			t.Fatalf("Run = %v, want an error wrapping serde.ErrUnavailable", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run went on with the registry unavailable")
	}
	consumeAll(t, e, "typed.dlq", 1) // still only c's
}
