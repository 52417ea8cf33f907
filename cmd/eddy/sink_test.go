package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/testutil/apprun"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/examples/ledger/pipeline"
	"github.com/eddy-streams/eddy/examples/ledger/pipeline/ledgerpb"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/internal/testutil"
	"github.com/eddy-streams/eddy/internal/testutil/pgtest"
	"github.com/eddy-streams/eddy/internal/testutil/registrytest"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/avro"
	"github.com/eddy-streams/eddy/serde/protobuf"
	"github.com/eddy-streams/eddy/serde/registry"
)

// sinkBin is the eddy binary the sink's process tests run, built once.
var sinkBin struct {
	once sync.Once
	path string
	err  error
}

func eddyForSink(t *testing.T) string {
	t.Helper()
	sinkBin.once.Do(func() {
		// Removed with the process's temp files; shared by the tests.
		sinkBin.path, _, sinkBin.err = testutil.BuildEddy("eddy-sink-test-")
	})
	if sinkBin.err != nil {
		t.Fatal(sinkBin.err)
	}
	return sinkBin.path
}

// sinkEnv is a broker with a 4-partition balances topic and a database
// for `eddy sink postgres` processes.
type sinkEnv struct {
	t      *testing.T
	bin    string
	broker *kafka.Broker
	// brokerCfg restarts the broker on the same address and data.
	brokerCfg kafka.BrokerConfig
	pg        *pgtest.Cluster
	db        *pgx.Conn
	cl        *kgo.Client
	seq       int
	want      map[string]string // account → its last balance record
	// encode writes a balance as a record value; nil: JSON.
	encode func(pipeline.Balance) []byte
}

func newSinkEnv(t *testing.T) *sinkEnv {
	pg := pgtest.Start(t)
	bin := eddyForSink(t)
	brokerCfg := kafka.BrokerConfig{DataDir: t.TempDir()}
	b, err := kafka.StartBroker(brokerCfg)
	if err != nil {
		t.Fatal(err)
	}
	brokerCfg.Addr = b.Addr()
	e := &sinkEnv{t: t, bin: bin, broker: b, brokerCfg: brokerCfg, pg: pg, want: map[string]string{}}
	t.Cleanup(func() { e.broker.Close() })
	apprun.CreateTopics(t, b.Addr(), 4, "balances")
	cl := apprun.Client(t, b.Addr())
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := pgx.Connect(ctx, pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.db.Close(context.Background()) })
	for _, q := range []string{
		"CREATE TABLE balances (account text PRIMARY KEY, id text, amount bigint, seq bigint, balance bigint)",
		"CREATE TABLE balance_log (account text, id text, amount bigint, seq bigint, balance bigint)",
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	e.db, e.cl = db, cl
	return e
}

// restartPostgres stops PostgreSQL immediately (pg_ctl stop -m
// immediate: a crash for its transactions) and starts it again; the
// test's own connection is opened again.
func (e *sinkEnv) restartPostgres() {
	if err := e.pg.Kill(); err != nil {
		e.t.Fatal(err)
	}
	if err := e.pg.Start(); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := pgx.Connect(ctx, e.pg.DSN())
	if err != nil {
		e.t.Fatal(err)
	}
	e.db.Close(ctx)
	e.db = db
}

// restartBroker stops the broker cleanly and starts it again on the same
// address and data directory.
func (e *sinkEnv) restartBroker() {
	e.broker.Close()
	b, err := kafka.StartBroker(e.brokerCfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.broker = b
}

// produce writes n ledger balances (keyed by account, over 50 accounts).
func (e *sinkEnv) produce(n int) {
	var recs []*kgo.Record
	for range n {
		e.seq++
		acct := "acct-" + strconv.Itoa(e.seq%50)
		v := []byte(fmt.Sprintf(`{"id":"p-%d","account":%q,"amount":%d,"seq":%d,"balance":%d}`, e.seq, acct, e.seq%100, e.seq, e.seq*7))
		if e.encode != nil {
			v = e.encode(pipeline.Balance{ID: fmt.Sprintf("p-%d", e.seq), Account: acct, Amount: int64(e.seq % 100), Seq: int64(e.seq), Balance: int64(e.seq * 7)})
		}
		e.want[acct] = fmt.Sprintf("%s p-%d %d %d %d", acct, e.seq, e.seq%100, e.seq, e.seq*7)
		recs = append(recs, &kgo.Record{Topic: "balances", Key: []byte(acct), Value: v})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
}

// sinkProc is one `eddy sink postgres` process.
type sinkProc struct {
	cmd  *exec.Cmd
	logs *testutil.LogBuffer
}

func (e *sinkEnv) start(table, mode string, extra ...string) *sinkProc {
	args := append([]string{"sink", "postgres", "--brokers", e.broker.Addr(), "--topic", "balances",
		"--dsn", e.pg.DSN(), "--table", table, "--key", "account", "--mode", mode,
		"--group", "g-" + table, "--session-timeout", "6s", "--batch-size", "200", "--batch-wait", "50ms"}, extra...)
	p := &sinkProc{cmd: exec.Command(e.bin, args...), logs: &testutil.LogBuffer{}}
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Kill()
		p.cmd.Wait()
		if e.t.Failed() {
			e.t.Logf("sink %d's log:\n%s", p.cmd.Process.Pid, p.logs)
		}
	})
	return p
}

// waitWritten waits until the group has committed every record produced.
// If it does not in time, the test fails with what would explain a stall:
// the database's sessions (waiting on a lock?) and the stacks of the
// sinks still running (SIGQUIT makes a Go process print them and exit).
func (e *sinkEnv) waitWritten(table string, running ...*sinkProc) {
	// Generous: after the kills the group may need a few rebalances
	// (each bounded by the sinks' 10 s rebalance timeout), and CI's two
	// cores run other packages' tests meanwhile.
	const within = 3 * time.Minute
	deadline := time.Now().Add(within)
	var got int64
	var err error
	for time.Now().Before(deadline) {
		err = e.db.QueryRow(context.Background(), "SELECT coalesce(sum(next_offset), 0) FROM eddy_sink_offsets WHERE group_id = $1", "g-"+table).Scan(&got)
		if err == nil && got == int64(e.seq) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	rows, qerr := e.db.Query(context.Background(), `SELECT pid, state, coalesce(wait_event_type, ''), coalesce(wait_event, ''),
		now() - xact_start, left(query, 120) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`)
	if qerr == nil {
		for rows.Next() {
			var pid int
			var state, waitType, wait, query string
			var age *time.Duration
			if rows.Scan(&pid, &state, &waitType, &wait, &age, &query) == nil {
				e.t.Logf("database session %d: %s, waiting on %s %s, transaction age %v: %s", pid, state, waitType, wait, age, query)
			}
		}
		rows.Close()
	}
	for _, p := range running {
		p.cmd.Process.Signal(syscall.SIGQUIT)
	}
	time.Sleep(time.Second) // the stacks reach the sinks' logs, which the cleanup prints
	e.t.Fatalf("%s: the sinks committed %d of %d records in %v (last query error: %v)", table, got, e.seq, within, err)
}

// check verifies exactly once: balance_log holds each record once,
// balances the last record of each account.
func (e *sinkEnv) check(table string) {
	ctx := context.Background()
	if table == "balance_log" {
		var rows, distinct, lo, hi int64
		if err := e.db.QueryRow(ctx, "SELECT count(*), count(DISTINCT seq), coalesce(min(seq), 0), coalesce(max(seq), 0) FROM balance_log").Scan(&rows, &distinct, &lo, &hi); err != nil {
			e.t.Fatal(err)
		}
		if rows != int64(e.seq) || distinct != rows || lo != 1 || hi != int64(e.seq) {
			e.t.Fatalf("balance_log: %d rows, %d distinct seqs in [%d, %d]; want %d, each once", rows, distinct, lo, hi, e.seq)
		}
		return
	}
	rows, err := e.db.Query(ctx, "SELECT account, id, amount, seq, balance FROM balances")
	if err != nil {
		e.t.Fatal(err)
	}
	got := map[string]string{}
	for rows.Next() {
		var a, id string
		var amount, seq, bal int64
		if err := rows.Scan(&a, &id, &amount, &seq, &bal); err != nil {
			e.t.Fatal(err)
		}
		got[a] = fmt.Sprintf("%s %s %d %d %d", a, id, amount, seq, bal)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(e.want) {
		e.t.Fatalf("balances differ from the reference:\n got %v\nwant %v", got, e.want)
	}
}

// TestSinkPostgresKills: two `eddy sink postgres` instances per table in
// one group each over 4 partitions (an upsert table and an append table,
// the same records), each pair SIGKILLed at random moments at least 8
// times (each killed one replaced by a new one), PostgreSQL stopped
// immediately and restarted once and the broker restarted once, all while
// records flow: the upsert table equals the reference (each account's
// last record) and the append table holds every record once.
func TestSinkPostgresKills(t *testing.T) {
	e := newSinkEnv(t)
	type pair struct {
		table, mode string
		procs       []*sinkProc
		kills       int
	}
	pairs := []*pair{{table: "balances", mode: "upsert"}, {table: "balance_log", mode: "append"}}
	for _, p := range pairs {
		p.procs = []*sinkProc{e.start(p.table, p.mode), e.start(p.table, p.mode)}
	}
	// A new seed each run, logged; EDDY_SINK_KILL_SEED replays one.
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("EDDY_SINK_KILL_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("EDDY_SINK_KILL_SEED=%q: %v", s, err)
		}
	}
	t.Logf("kill schedule seed %d (EDDY_SINK_KILL_SEED replays it)", seed)
	rng := rand.New(rand.NewPCG(seed, 19))
	start := time.Now()
	const steps = 60
	for step := 0; step < steps; step++ {
		e.produce(100)
		time.Sleep(time.Duration(20+rng.IntN(60)) * time.Millisecond)
		switch step {
		case 20:
			e.restartPostgres()
			t.Log("PostgreSQL stopped immediately and restarted")
		case 40:
			e.restartBroker()
			t.Log("broker restarted")
		}
		for _, p := range pairs {
			// At random, and often enough for 8 kills by the end.
			if rng.IntN(5) == 0 || steps-step <= 2*(8-p.kills) {
				i := rng.IntN(len(p.procs))
				p.procs[i].cmd.Process.Kill()
				p.procs[i].cmd.Wait()
				p.procs[i] = e.start(p.table, p.mode)
				p.kills++
			}
		}
	}
	for _, p := range pairs {
		e.waitWritten(p.table, p.procs...)
		e.check(p.table)
		t.Logf("%s: %d records, %d SIGKILLs of its two instances, PostgreSQL and the broker restarted: exactly once (%v after the start)", p.mode, e.seq, p.kills, time.Since(start).Round(time.Second))
	}
}

// TestSinkPostgresZombie: an instance frozen (SIGSTOP) past its session
// timeout while it holds a batch, its partitions taken over by another
// that writes, then resumed (SIGCONT): it is fenced, none of its writes
// become visible (every record is still one row in the append table).
func TestSinkPostgresZombie(t *testing.T) {
	e := newSinkEnv(t)
	// A long batch wait: the zombie almost always holds records.
	zombie := e.start("balance_log", "append", "--batch-wait", "3s", "--batch-size", "100000")
	e.produce(500)
	e.waitWritten("balance_log")
	e.produce(300)
	time.Sleep(500 * time.Millisecond) // it has fetched them, and holds them for 3s
	if err := zombie.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	e.start("balance_log", "append")
	e.produce(300)
	e.waitWritten("balance_log") // the successor wrote all, the zombie's held ones too
	if err := zombie.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(zombie.logs.String(), "fenced") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(zombie.logs.String(), "fenced") {
		t.Fatalf("the resumed zombie was not fenced:\n%s", zombie.logs)
	}
	e.produce(300)
	e.waitWritten("balance_log")
	e.check("balance_log")
}

// TestSinkPostgresFormatFlags: the format flags that do not go together,
// or are missing or malformed, are refused before anything starts, with
// an error naming the flag.
func TestSinkPostgresFormatFlags(t *testing.T) {
	dir := t.TempDir()
	notRecord := filepath.Join(dir, "string.avsc")
	if err := os.WriteFile(notRecord, []byte(`"string"`), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"--topic", "t", "--dsn", "postgres://127.0.0.1:1/db", "--table", "t", "--key", "k"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "avro"}, "--format avro needs --schema-registry URL"},
		{[]string{"--format", "protobuf"}, "--format protobuf needs --schema-registry URL"},
		{[]string{"--format", "xml"}, `--format "xml": want json, avro or protobuf`},
		{[]string{"--schema-registry", "http://127.0.0.1:8081"}, "--schema-registry is for --format avro or protobuf"},
		{[]string{"--value-schema", notRecord}, "--value-schema is for --format avro"},
		{[]string{"--format", "protobuf", "--schema-registry", "http://127.0.0.1:8081", "--value-schema", notRecord}, "--value-schema is for --format avro"},
		{[]string{"--format", "avro", "--schema-registry", "127.0.0.1:8081"}, `--schema-registry "127.0.0.1:8081": want an http:// or https:// URL`},
		{[]string{"--format", "avro", "--schema-registry", "http://127.0.0.1:8081", "--value-schema", filepath.Join(dir, "none.avsc")}, "--value-schema: open"},
		{[]string{"--format", "avro", "--schema-registry", "http://127.0.0.1:8081", "--value-schema", notRecord}, "not a record"},
	} {
		err := runSinkPostgres(context.Background(), append(append([]string(nil), base...), c.args...))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error containing %q", c.args, err, c.want)
		}
	}
}

// TestSinkPostgresFormats: `eddy sink postgres --format avro` and
// `--format protobuf` write the ledger's balances, encoded by eddy's Avro
// and Protobuf serdes through eddy's registry, into the upsert and the
// append table; --value-schema with a field the table lacks stops the
// sink at start naming the column; a registry that cannot be reached
// stops it after --db-timeout, dead-lettering nothing.
func TestSinkPostgresFormats(t *testing.T) {
	t.Run("avro", func(t *testing.T) {
		e := newSinkEnv(t)
		url := registrytest.Start(t)
		s, err := avro.Value[pipeline.Balance](newRegistryClient(t, url), "balances", pipeline.BalanceAvroSchema)
		if err != nil {
			t.Fatal(err)
		}
		e.encode = serializer(t, s)
		schema := filepath.Join(t.TempDir(), "balance.avsc")
		if err := os.WriteFile(schema, []byte(pipeline.BalanceAvroSchema), 0o644); err != nil {
			t.Fatal(err)
		}
		e.produce(200)
		e.start("balances", "upsert", "--format", "avro", "--schema-registry", url, "--value-schema", schema)
		e.produce(200)
		e.waitWritten("balances")
		e.check("balances")

		// The sinks below must stop by themselves; killed if they do not,
		// which fails the test.
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()

		// A field of the value schema without a column: refused at start.
		wider := filepath.Join(t.TempDir(), "wider.avsc")
		text := strings.Replace(pipeline.BalanceAvroSchema, `{"name":"balance","type":"long"}`, `{"name":"balance","type":"long"},{"name":"colour","type":"string"}`, 1)
		if err := os.WriteFile(wider, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(ctx, e.bin, "sink", "postgres", "--brokers", e.broker.Addr(), "--topic", "balances", "--dsn", e.pg.DSN(),
			"--table", "balances", "--key", "account", "--group", "g-wider", "--format", "avro", "--schema-registry", url, "--value-schema", wider).CombinedOutput()
		if err == nil || !strings.Contains(string(out), `eddy sink: eddy: pgsink: table balances has no column "colour" written`) {
			t.Fatalf("a value schema with a field the table lacks: %v\n%s", err, out)
		}

		// The registry unreachable: the sink stops after --db-timeout,
		// blaming no record.
		down := exec.CommandContext(ctx, e.bin, "sink", "postgres", "--brokers", e.broker.Addr(), "--topic", "balances", "--dsn", e.pg.DSN(),
			"--table", "balance_log", "--mode", "append", "--group", "g-down", "--db-timeout", "2s", "--format", "avro", "--schema-registry", registrytest.ClosedURL(t))
		out, err = down.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "service unavailable") ||
			!strings.Contains(string(out), "schema registry unavailable; retrying") {
			t.Fatalf("sink with the registry down: %v\n%s", err, out)
		}
		var written int64
		if err := e.db.QueryRow(context.Background(), "SELECT coalesce(sum(next_offset), 0) FROM eddy_sink_offsets WHERE group_id = 'g-down'").Scan(&written); err != nil || written != 0 {
			t.Fatalf("with the registry down the sink wrote %d records (%v)", written, err)
		}
		ends, err := kadm.NewClient(e.cl).ListEndOffsets(context.Background(), "balances.dlq")
		if err != nil || len(ends) == 0 {
			t.Fatalf("balances.dlq: %v %v", ends, err)
		}
		ends.Each(func(o kadm.ListedOffset) {
			if o.Offset != 0 {
				t.Errorf("balances.dlq partition %d holds %d dead letters, want none", o.Partition, o.Offset)
			}
		})
	})
	t.Run("protobuf", func(t *testing.T) {
		e := newSinkEnv(t)
		url := registrytest.Start(t)
		s, err := protobuf.Value[*ledgerpb.Balance](newRegistryClient(t, url), "balances")
		if err != nil {
			t.Fatal(err)
		}
		toProto := serializer(t, s)
		e.encode = func(b pipeline.Balance) []byte {
			return toProto(&ledgerpb.Balance{Id: b.ID, Account: b.Account, Amount: b.Amount, Seq: b.Seq, Balance: b.Balance})
		}
		e.produce(200)
		e.start("balance_log", "append", "--format", "protobuf", "--schema-registry", url)
		e.produce(200)
		e.waitWritten("balance_log")
		e.check("balance_log")
	})
}

func newRegistryClient(t *testing.T, url string) *registry.Client {
	t.Helper()
	c, err := registry.New(registry.Config{URLs: []string{url}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// serializer is s's Serialize, failing the test on an error.
func serializer[V any](t *testing.T, s serde.Serde[V]) func(V) []byte {
	return func(v V) []byte {
		b, err := s.Serialize(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}
