package pgsink

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/testutil"
	"github.com/eddy-streams/eddy/serde"
)

// benchWay is one way of writing the balances, with its batching.
type benchWay struct {
	name string
	// batch is Run's BatchSize (its BatchWait stays 200 ms): one
	// transaction holds the batch's rows of all four partitions.
	batch int
	// commitRecords and interval are the app's CommitRecords and
	// CommitInterval: each of its four tasks prepares one transaction
	// per Kafka transaction.
	commitRecords int
	interval      time.Duration
	// loop is the at-least-once loop (polls of up to 5000 records).
	loop bool
	// discard runs the app with a sink that maps the records as To does
	// and discards the rows (no database): what of the app's time is its
	// own (Kafka transactions, the sink's token in the changelog).
	discard bool
}

// benchWays pair Run and the app at comparable transaction sizes (the
// benchmark reports the rows per transaction it finds, append mode):
// Run's default batches of 5000 against the app capped at 5000 records
// per commit, with Run's 200 ms as its interval (a poll of the full topic
// brings mostly one partition's records, so most commits have one task
// with rows: about 4300 rows per prepared transaction, measured); and the
// app's defaults (100 ms, at most 100,000 records per commit: on a topic
// already full the cap ends each commit, about 22,000–25,000 rows per
// prepared transaction) against Run with batches of 25,000.
var benchWays = []benchWay{
	{name: "offsets-in-db/batch-5000", batch: 5000},
	{name: "two-phase/commit-5000", commitRecords: 5000, interval: 200 * time.Millisecond},
	{name: "offsets-in-db/batch-25000", batch: 25000},
	{name: "two-phase/default", commitRecords: 100000, interval: 100 * time.Millisecond},
}

// BenchmarkSinkTwoPhaseVsOffsets measures the cost of the in-cycle sink's
// two-phase commit against the sink from a topic's offsets in the
// database, on the same work: 200,000 ledger balances (JSON, 10,000
// accounts, record key the account) already in a 4-partition topic of
// the embedded broker, mapped by JSONMapper("account") into the same
// table definition (created afresh for each run) in PostgreSQL (fsync
// on), in each mode:
//
//   - upsert: balances (account text PRIMARY KEY, …), the last balance of
//     each account stays;
//   - append: balance_log (no key), every balance a row;
//   - delete: upsert with every 7th record a tombstone of its account
//     (its own topic), so that batches mix upserts and deletes.
//
// Each is written by:
//
//   - offsets-in-db/batch-N: pgsink.Run, exactly once (each batch one
//     transaction with its partitions' offsets), batches of N records or
//     200 ms (5000 is Run's default);
//   - two-phase/…: an eddy app Source(topic) → To at eddy.ExactlyOnce:
//     per task and commit one PREPARE TRANSACTION before the Kafka commit
//     and one COMMIT PREPARED after; commit-5000 caps a commit at 5000
//     records (as Run's default batch), default is eddy's defaults
//     (about 25,000 rows per prepared transaction here, as batch-25000;
//     see benchWays);
//   - at-least-once/poll-5000 (upsert only): the loop of BenchmarkSink
//     (poll up to 5000 records, upsert them in one transaction, commit
//     the offsets to Kafka), for the ratio;
//   - app-without-db/… (upsert only, not a way of writing): the same app
//     and settings as two-phase/…, its sink mapping the records and
//     discarding the rows (a token per prepare, no database): the app's
//     own share of the two-phase time, done when the app's offsets and
//     the rows its sink committed both count every record.
//
// rows/s is records from the start (group join and, for the app, its
// startup included) until every record's row is committed: Run's offsets
// in the database, or the app's group offsets in Kafka and none of its
// transactions left prepared (the rows are committed after the Kafka
// commit); the table's content is then checked against what the records
// make (not timed). rows/tx (append only) is records per transaction
// that wrote rows, counted from the rows' distinct xmin. One pass (use
// -benchtime 1x):
//
//	go test -run '^$' -bench BenchmarkSinkTwoPhaseVsOffsets -benchtime 1x ./pgsink
func BenchmarkSinkTwoPhaseVsOffsets(b *testing.B) {
	const records, accounts = 200000, 10000
	const topic, delTopic = "bal-10000", "bal-10000-del"
	e := newBenchEnv(b, topic, delTopic)
	tombstone := func(i int) bool { return i%7 == 0 }
	produceBalances(b, e.cl, topic, accounts, records, nil)
	produceBalances(b, e.cl, delTopic, accounts, records, tombstone)

	run := 0
	for _, m := range []struct {
		name, topic, table, ddl string
		mode                    Mode
		want                    func(*testing.B, *pgx.Conn, string)
	}{
		{"upsert", topic, "balances", "(account text PRIMARY KEY, id text, amount bigint, seq bigint, balance bigint)", Upsert,
			func(b *testing.B, c *pgx.Conn, t string) { checkLatest(b, c, t, accounts, records, nil) }},
		{"append", topic, "balance_log", "(account text, id text, amount bigint, seq bigint, balance bigint)", Append,
			func(b *testing.B, c *pgx.Conn, t string) { checkAll(b, c, t, accounts, records) }},
		{"delete", delTopic, "balances", "(account text PRIMARY KEY, id text, amount bigint, seq bigint, balance bigint)", Upsert,
			func(b *testing.B, c *pgx.Conn, t string) { checkLatest(b, c, t, accounts, records, tombstone) }},
	} {
		ws := benchWays
		if m.name == "upsert" {
			ws = append(ws[:len(ws):len(ws)], benchWay{name: "at-least-once/poll-5000", loop: true},
				benchWay{name: "app-without-db/commit-5000", commitRecords: 5000, interval: 200 * time.Millisecond, discard: true},
				benchWay{name: "app-without-db/default", commitRecords: 100000, interval: 100 * time.Millisecond, discard: true})
		}
		for _, w := range ws {
			b.Run(m.name+"/"+w.name, func(b *testing.B) {
				for range b.N {
					run++
					exec(b, e.conn, "DROP TABLE IF EXISTS "+m.table)
					exec(b, e.conn, "CREATE TABLE "+m.table+" "+m.ddl)
					table := Table{Name: m.table, Key: []string{"account"}, Mode: m.mode}
					id := fmt.Sprintf("bench-2pc-%d", run)
					var elapsed time.Duration
					switch {
					case w.commitRecords > 0:
						elapsed = e.twoPhase(b, id, m.topic, table, w, records)
					case w.loop:
						cfg := Config{Brokers: []string{e.broker.Addr()}, Topic: m.topic, Group: id, Table: table}
						elapsed = atLeastOnce(b, e, cfg, records)
					default:
						elapsed = e.offsetsInDB(b, id, m.topic, table, w.batch, records)
					}
					b.ReportMetric(float64(records)/elapsed.Seconds(), "rows/s")
					if w.discard {
						continue // twoPhase counted the rows its sink committed
					}
					m.want(b, e.conn, m.table)
					if m.mode == Append {
						var txs int
						if err := e.conn.QueryRow(context.Background(), "SELECT count(DISTINCT xmin::text) FROM "+m.table).Scan(&txs); err != nil {
							b.Fatal(err)
						}
						b.ReportMetric(float64(records)/float64(txs), "rows/tx")
					}
				}
			})
		}
	}
}

// offsetsInDB runs Run (batches of batch records or 200 ms) as group
// until its offsets in the database count records, and returns the time
// it took.
func (e *env) offsetsInDB(b *testing.B, group, topic string, table Table, batch, records int) time.Duration {
	logs := &testutil.LogBuffer{}
	cfg := Config{
		Brokers: []string{e.broker.Addr()}, Topic: topic, Group: group, DSN: e.pg.DSN(), Table: table,
		BatchSize: batch, BatchWait: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- Run(ctx, cfg) }()
	waitBench(b, "Run", done, logs, func() (bool, string) {
		var got int64
		err := e.conn.QueryRow(context.Background(), "SELECT coalesce(sum(next_offset), 0) FROM "+OffsetsTable+" WHERE group_id = $1", group).Scan(&got)
		return err == nil && got == int64(records), fmt.Sprintf("%d of %d records' offsets in the database (%v)", got, records, err)
	})
	elapsed := time.Since(start)
	cancel()
	if err := <-done; err != nil {
		b.Fatalf("Run: %v\n%s", err, logs)
	}
	return elapsed
}

// twoPhase runs the app Source(topic) → To(table) at eddy.ExactlyOnce
// with w's CommitRecords and CommitInterval until its group's offsets in
// Kafka count records (its last Kafka transaction committed) and none of
// its transactions is prepared in the database (the rows of each task's
// last transaction, committed after it), and returns the time it took.
func (e *env) twoPhase(b *testing.B, appID, topic string, table Table, w benchWay, records int) time.Duration {
	logs := &testutil.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	topo := eddy.NewTopology()
	mp := JSONMapper("account")
	rows := func(r eddy.Record[[]byte, []byte]) (Row, error) { return mp(r.Key, r.Value) }
	src := eddy.Source(topo, topic, serde.Bytes(), serde.Bytes())
	var discarded atomic.Int64 // rows the discard sink committed
	if w.discard {
		eddy.ToTransactional(src, "discard", func(eddy.SinkTask) (eddy.TransactionalSink[[]byte, []byte], error) {
			return &discardSink{rows: rows, committed: &discarded}, nil
		})
	} else {
		To(src, "pg", CycleConfig[[]byte, []byte]{DSN: e.pg.DSN(), Table: table, Logger: log, Rows: rows})
	}
	// OnProduceError stays Fail: a record the sink refused would stop
	// the app, not go missing from the count (Run's dead-lettered one
	// would fail the content check).
	cfg := eddy.Config{
		AppID: appID, Brokers: []string{e.broker.Addr()}, StateDir: b.TempDir(),
		Guarantee: eddy.ExactlyOnce, CommitRecords: w.commitRecords, CommitInterval: w.interval,
		Logger: log,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- eddy.Run(ctx, topo, cfg) }()
	adm := kadm.NewClient(e.cl)
	waitBench(b, "the app", done, logs, func() (bool, string) {
		ctx := context.Background()
		var got, prepared int64
		offs, err := adm.FetchOffsets(ctx, appID)
		if err == nil {
			err = offs.Error()
		}
		offs.Each(func(o kadm.OffsetResponse) { got += max(o.At, 0) })
		if w.discard {
			n := discarded.Load()
			return err == nil && got == int64(records) && n == int64(records),
				fmt.Sprintf("%d of %d records' offsets in Kafka, %d rows committed (%v)", got, records, n, err)
		}
		if err == nil && got == int64(records) {
			err = e.conn.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_xacts WHERE starts_with(gid, $1)`, "eddy:"+appID+":").Scan(&prepared)
			if err == nil && prepared == 0 {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d of %d records' offsets in Kafka, %d transactions prepared (%v)", got, records, prepared, err)
	})
	elapsed := time.Since(start)
	cancel()
	if err := <-done; err != nil {
		b.Fatalf("eddy.Run: %v\n%s", err, logs)
	}
	return elapsed
}

// discardSink maps each record to its row, as To does, and keeps only
// their count: committed counts the rows of the transactions committed.
type discardSink struct {
	rows      func(eddy.Record[[]byte, []byte]) (Row, error)
	committed *atomic.Int64
	open      int64            // rows written since the last prepare
	prepared  map[string]int64 // rows by token
	seq       int
}

func (s *discardSink) Recover([]byte) error {
	s.prepared = map[string]int64{}
	return nil
}

func (s *discardSink) Write(r eddy.Record[[]byte, []byte]) error {
	if _, err := s.rows(r); err != nil {
		return err
	}
	s.open++
	return nil
}

func (s *discardSink) Prepare() ([]byte, []eddy.Refusal, error) {
	if s.open == 0 {
		return nil, nil, nil
	}
	s.seq++
	token := strconv.Itoa(s.seq)
	s.prepared[token], s.open = s.open, 0
	return []byte(token), nil, nil
}

func (s *discardSink) Commit(token []byte) error {
	s.committed.Add(s.prepared[string(token)])
	delete(s.prepared, string(token))
	return nil
}

func (s *discardSink) Abort(token []byte) error {
	s.open = 0
	delete(s.prepared, string(token))
	return nil
}

func (s *discardSink) Close() error { return nil }

// waitBench polls done every 20 ms (both ways alike) until it reports
// true, for at most 2 minutes; it fails b, saying where the writer got
// to and what it logged, if the writer (who) stops first or the 2
// minutes pass.
func waitBench(b *testing.B, who string, stopped <-chan error, logs fmt.Stringer, done func() (bool, string)) {
	b.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; {
		ok, where := done()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s did not finish in 2 minutes: %s\n%s", who, where, logs)
		}
		select {
		case err := <-stopped:
			b.Fatalf("%s stopped (%v) at %s\n%s", who, err, where, logs)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// checkLatest checks that table holds, for each of accounts accounts, the
// row of its last record (the balances 1..records, record i for account
// i%accounts), or no row when that record is a tombstone.
func checkLatest(b *testing.B, conn *pgx.Conn, table string, accounts, records int, tombstone func(int) bool) {
	b.Helper()
	want := map[string]int{} // account → seq of its row
	for i := records - accounts + 1; i <= records; i++ {
		if tombstone == nil || !tombstone(i) {
			want[fmt.Sprintf("acct-%d", i%accounts)] = i
		}
	}
	rows, err := conn.Query(context.Background(), "SELECT account, id, amount, seq, balance FROM "+table)
	if err != nil {
		b.Fatal(err)
	}
	type row struct {
		account, id          string
		amount, seq, balance int
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.account, &x.id, &x.amount, &x.seq, &x.balance)
	})
	if err != nil {
		b.Fatal(err)
	}
	var bad []string
	for _, r := range got {
		seq, ok := want[r.account]
		if !ok || r.seq != seq || r.id != fmt.Sprintf("p-%d", seq) || r.amount != seq%100 || r.balance != seq*7 {
			bad = append(bad, fmt.Sprintf("%+v (want seq %d, row wanted: %v)", r, seq, ok))
		}
	}
	if len(got) != len(want) || len(bad) > 0 {
		if len(bad) > 5 {
			bad = bad[:5]
		}
		b.Fatalf("%s holds %d rows, want %d; wrong rows (first 5): %s", table, len(got), len(want), strings.Join(bad, "; "))
	}
}

// checkAll checks that table holds the row of each of the balances
// 1..records exactly once, with its fields.
func checkAll(b *testing.B, conn *pgx.Conn, table string, accounts, records int) {
	b.Helper()
	var n, distinct, wrong int
	err := conn.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT seq),
		count(*) FILTER (WHERE seq NOT BETWEEN 1 AND $1 OR id <> 'p-' || seq OR account <> 'acct-' || (seq % $2)
			OR amount <> seq % 100 OR balance <> seq * 7)
		FROM `+table, records, accounts).Scan(&n, &distinct, &wrong)
	if err != nil {
		b.Fatal(err)
	}
	if n != records || distinct != records || wrong != 0 {
		b.Fatalf("%s holds %d rows (%d distinct balances, %d wrong), want each of the %d balances once", table, n, distinct, wrong, records)
	}
}
