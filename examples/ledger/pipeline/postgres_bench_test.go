package pipeline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/testutil/pgtest"
)

// BenchmarkLedgerPostgres measures the ledger end to end on 200,000
// payments over 10,000 accounts already in a 4-partition topic of the
// embedded broker: without a sink, and with --postgres (every balance
// upserted into ledger_balances and appended into ledger_payments by the
// in-cycle sink: two prepared transactions per task and commit), exactly
// once and at least once. rows/s is payments from the ledger's start
// until the balances topic (and the tables) hold them all; one pass (use
// -benchtime 1x).
//
//	go test -run '^$' -bench BenchmarkLedgerPostgres -benchtime 1x ./examples/ledger/pipeline
func BenchmarkLedgerPostgres(b *testing.B) {
	const payments, accounts = 200_000, 10_000
	broker := startBroker(b)
	db := pgtest.Start(b)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.DSN())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr()), kgo.DefaultProduceTopic("payments"))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if err := CreateTopics(ctx, []string{broker.Addr()}, nil, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)), "payments", 4); err != nil {
		b.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range payments {
		acct := "acct-" + strconv.Itoa(i%accounts)
		recs = append(recs, payment(fmt.Sprint("p", i), acct, int64(i%100)))
		if len(recs) == 10_000 {
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"no-sink", nil},
		{"postgres/exactly-once", []string{"--postgres", db.DSN()}},
		{"postgres/at-least-once", []string{"--postgres", db.DSN(), "--guarantee", "at-least-once"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+BalancesTable+", "+PaymentsTable); err != nil {
					b.Fatal(err)
				}
				output := "balances-" + strconv.FormatInt(time.Now().UnixNano(), 36)
				start := time.Now()
				stop := runLedgerB(b, broker.Addr(), b.TempDir(), append([]string{"--app-id", output, "--output", output}, tc.flags...)...)
				consumeCount(b, broker.Addr(), output, payments)
				if tc.flags != nil {
					waitCount(b, func() (n int, err error) {
						err = conn.QueryRow(ctx, "SELECT count(*) FROM "+PaymentsTable).Scan(&n)
						return n, err
					}, payments)
				}
				elapsed := time.Since(start)
				stop()
				b.ReportMetric(float64(payments)/elapsed.Seconds(), "rows/s")
			}
		})
	}
}

func runLedgerB(b *testing.B, addr, dir string, flags ...string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Main(ctx, append([]string{"--brokers", addr, "--state-dir", dir, "--log-level", "error"}, flags...), io.Discard)
	}()
	return func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("ledger: %v", err)
		}
	}
}

// consumeCount reads topic read_committed until it has n records.
func consumeCount(b *testing.B, addr, topic string, n int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for got := 0; got < n; {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			b.Fatalf("%d of %d records of %s after 5 minutes", got, n, topic)
		}
		got += f.NumRecords()
	}
}

// waitCount polls count until it reaches n (a hang guard of 5 minutes).
func waitCount(b *testing.B, count func() (int, error), n int) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		got, err := count()
		if err == nil && got >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d after 5 minutes (%v)", got, n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
