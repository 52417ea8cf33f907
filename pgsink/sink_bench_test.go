package pgsink

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/testutil"
)

// BenchmarkSink measures the sink end to end: the ledger's balances (JSON,
// over 10,000 or 1000 accounts: bal-10000, bal-1000) already in a 4-partition topic of the embedded broker,
// written into PostgreSQL (fsync on) by Run with its defaults (batches of
// 5000), exactly once, in each mode; and, on the same data and table, an
// at-least-once loop: poll up to 5000 records, upsert them with the same
// Writer in one transaction, then commit the offsets to Kafka. rows/s is
// records from the first poll to the last commit, one pass (use -benchtime
// 1x).
//
//	go test -run '^$' -bench BenchmarkSink -benchtime 1x ./pgsink
func BenchmarkSink(b *testing.B) {
	const records = 200000
	e := newBenchEnv(b, "bal-10000", "bal-1000")
	for _, q := range []string{
		"CREATE TABLE balances (account text PRIMARY KEY, id text, amount bigint, seq bigint, balance bigint)",
		"CREATE TABLE balance_log (account text, id text, amount bigint, seq bigint, balance bigint)",
	} {
		exec(b, e.conn, q)
	}
	// 10,000 accounts as eddy bench's ledger, 1000 as eddy demo's.
	for _, accounts := range []int{10000, 1000} {
		produceBalances(b, e.cl, "bal-"+strconv.Itoa(accounts), accounts, records, nil)
	}
	run := 0
	for _, tc := range []struct {
		name, table string
		mode        Mode
		exactlyOnce bool
	}{
		{"exactly-once/upsert", "balances", Upsert, true},
		{"exactly-once/append", "balance_log", Append, true},
		{"at-least-once/upsert", "balances", Upsert, false},
	} {
		for _, topic := range []string{"bal-10000", "bal-1000"} {
			b.Run(tc.name+"/"+topic, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					run++
					exec(b, e.conn, "TRUNCATE "+tc.table)
					cfg := Config{
						Brokers: []string{e.broker.Addr()}, Topic: topic, Group: fmt.Sprintf("bench-%d", run), DSN: e.pg.DSN(),
						Table:  Table{Name: tc.table, Key: []string{"account"}, Mode: tc.mode},
						Logger: slog.New(slog.NewTextHandler(&testutil.LogBuffer{}, nil)),
					}
					start := time.Now()
					var elapsed time.Duration
					if tc.exactlyOnce {
						ctx, cancel := context.WithCancel(context.Background())
						done := make(chan error, 1)
						go func() { done <- Run(ctx, cfg) }()
						e.waitWrittenB(b, cfg.Group, records, done)
						elapsed = time.Since(start)
						cancel()
						<-done
					} else {
						elapsed = atLeastOnce(b, e, cfg, records)
					}
					b.ReportMetric(float64(records)/elapsed.Seconds(), "rows/s")
				}
			})
		}
	}
}

// produceBalances writes the ledger's balances 1..records over accounts
// accounts (record key: the account) to topic; the records for which
// tombstone (when not nil) holds are tombstones of their account instead.
func produceBalances(b testing.TB, cl *kgo.Client, topic string, accounts, records int, tombstone func(i int) bool) {
	b.Helper()
	var recs []*kgo.Record
	for i := 1; i <= records; i++ {
		acct := "acct-" + strconv.Itoa(i%accounts)
		r := &kgo.Record{Topic: topic, Key: []byte(acct)}
		if tombstone == nil || !tombstone(i) {
			r.Value = []byte(fmt.Sprintf(`{"id":"p-%d","account":%q,"amount":%d,"seq":%d,"balance":%d}`, i, acct, i%100, i, i*7))
		}
		recs = append(recs, r)
		if len(recs) == 10000 || i == records {
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
}

// atLeastOnce is the loop the sink is compared with: no offsets in the
// database, Kafka offsets committed after each transaction.
func atLeastOnce(b *testing.B, e *env, cfg Config, records int) time.Duration {
	ctx := context.Background()
	w, err := NewWriter(ctx, e.conn, cfg.Table)
	if err != nil {
		b.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.ConsumerGroup(cfg.Group), kgo.ConsumeTopics(cfg.Topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	mp := JSONMapper("account")
	start := time.Now()
	for n := 0; n < records; {
		recs := cl.PollRecords(ctx, 5000).Records()
		rows := make([]Row, 0, len(recs))
		for _, r := range recs {
			row, err := mp(r.Key, r.Value)
			if err != nil {
				b.Fatal(err)
			}
			rows = append(rows, row)
		}
		tx, err := e.conn.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Write(ctx, tx, rows); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		if err := cl.CommitRecords(ctx, recs...); err != nil {
			b.Fatal(err)
		}
		n += len(recs)
	}
	return time.Since(start)
}
