package pgsink

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/eddy-streams/eddy/internal/testutil/pgtest"
)

// BenchmarkWriter measures the Writer's two ways of sending a batch
// (unnest arrays, COPY into a temporary table) in each write mode, and
// in upsert mode the statement that de-duplicates keys in the database
// (byvalue, used when keys equal as values differ as text), one
// committed transaction per batch, on a local cluster with fsync on. Rows
// are the ledger's balances (JSON, through JSONMapper) over 10,000
// accounts, so an upsert batch updates rows that exist. rows/s counts
// rows given to Write.
//
//	go test -run '^$' -bench BenchmarkWriter -benchtime 20x ./pgsink
func BenchmarkWriter(b *testing.B) {
	c := pgtest.Start(b)
	conn := connect(b, c.DSN())
	ctx := context.Background()
	const accounts, batchSize = 10000, 5000
	mp := JSONMapper("account")
	seq := 0
	batchOf := func() []Row {
		rows := make([]Row, batchSize)
		for i := range rows {
			seq++
			acct := "acct-" + strconv.Itoa(seq%accounts)
			v := fmt.Sprintf(`{"id":"p-%d","account":%q,"amount":%d,"seq":%d,"balance":%d}`, seq, acct, seq%100, seq, seq*3)
			r, err := mp([]byte(acct), []byte(v))
			if err != nil {
				b.Fatal(err)
			}
			rows[i] = r
		}
		return rows
	}
	for _, mode := range []Mode{Upsert, Append} {
		for _, m := range methods {
			if m.m == viaUnnestByValue && mode != Upsert {
				continue // the same as unnest
			}
			b.Run(mode.String()+"/"+m.name, func(b *testing.B) {
				table := fmt.Sprintf("bench_%s_%s", mode, m.name)
				exec(b, conn, fmt.Sprintf("DROP TABLE IF EXISTS %s", table))
				if mode == Upsert {
					exec(b, conn, fmt.Sprintf("CREATE TABLE %s (account text PRIMARY KEY, id text, amount bigint, seq bigint, balance bigint)", table))
				} else {
					exec(b, conn, fmt.Sprintf("CREATE TABLE %s (account text, id text, amount bigint, seq bigint, balance bigint)", table))
				}
				w, err := NewWriter(ctx, conn, Table{Name: table, Key: []string{"account"}, Mode: mode})
				if err != nil {
					b.Fatal(err)
				}
				w.method = m.m
				batches := make([][]Row, b.N)
				for i := range batches {
					batches[i] = batchOf()
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					tx, err := conn.Begin(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if err := w.Write(ctx, tx, batches[i]); err != nil {
						b.Fatal(err)
					}
					if err := tx.Commit(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*batchSize)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}
