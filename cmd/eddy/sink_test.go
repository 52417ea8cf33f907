package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/testutil/apprun"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/internal/testutil"
	"github.com/eddy-streams/eddy/internal/testutil/pgtest"
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
	pg     *pgtest.Cluster
	db     *pgx.Conn
	cl     *kgo.Client
	seq    int
	want   map[string]string // account → its last balance record
}

func newSinkEnv(t *testing.T) *sinkEnv {
	pg := pgtest.Start(t)
	bin := eddyForSink(t)
	b, err := kafka.StartBroker(kafka.BrokerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	apprun.CreateTopics(t, b.Addr(), 4, "balances")
	cl := apprun.Client(t, b.Addr())
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := pgx.Connect(ctx, pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	for _, q := range []string{
		"CREATE TABLE balances (account text PRIMARY KEY, id text, amount bigint, seq bigint, balance bigint)",
		"CREATE TABLE balance_log (account text, id text, amount bigint, seq bigint, balance bigint)",
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return &sinkEnv{t: t, bin: bin, broker: b, pg: pg, db: db, cl: cl, want: map[string]string{}}
}

// produce writes n ledger balances (keyed by account, over 50 accounts).
func (e *sinkEnv) produce(n int) {
	var recs []*kgo.Record
	for range n {
		e.seq++
		acct := "acct-" + strconv.Itoa(e.seq%50)
		v := fmt.Sprintf(`{"id":"p-%d","account":%q,"amount":%d,"seq":%d,"balance":%d}`, e.seq, acct, e.seq%100, e.seq, e.seq*7)
		e.want[acct] = fmt.Sprintf("%s p-%d %d %d %d", acct, e.seq, e.seq%100, e.seq, e.seq*7)
		recs = append(recs, &kgo.Record{Topic: "balances", Key: []byte(acct), Value: []byte(v)})
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
func (e *sinkEnv) waitWritten(table string) {
	deadline := time.Now().Add(90 * time.Second)
	var got int64
	for time.Now().Before(deadline) {
		err := e.db.QueryRow(context.Background(), "SELECT coalesce(sum(next_offset), 0) FROM eddy_sink_offsets WHERE group_id = $1", "g-"+table).Scan(&got)
		if err == nil && got == int64(e.seq) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("%s: the sinks committed %d of %d records in 90s", table, got, e.seq)
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

// TestSinkPostgresKills: two `eddy sink postgres` instances in one group
// over 4 partitions, one SIGKILLed mid-stream and a new one started: the
// table equals the reference (upsert) and every record is one row
// (append).
func TestSinkPostgresKills(t *testing.T) {
	for _, tc := range []struct{ table, mode string }{{"balances", "upsert"}, {"balance_log", "append"}} {
		t.Run(tc.mode, func(t *testing.T) {
			e := newSinkEnv(t)
			a := e.start(tc.table, tc.mode)
			e.start(tc.table, tc.mode)
			for i := 0; i < 30; i++ {
				e.produce(200)
				time.Sleep(20 * time.Millisecond)
				if i == 15 {
					a.cmd.Process.Kill()
					a.cmd.Wait()
					e.start(tc.table, tc.mode)
				}
			}
			e.waitWritten(tc.table)
			e.check(tc.table)
		})
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
