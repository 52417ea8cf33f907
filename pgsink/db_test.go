package pgsink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eddy-streams/eddy/internal/testutil"
	"github.com/eddy-streams/eddy/internal/testutil/pgtest"
)

// TestDBDo: an error a retry would repeat is returned at once, prefixed
// with what failed; an attempt that hangs (a database that stopped
// answering) is cut at its bound and counts as the database failing.
func TestDBDo(t *testing.T) {
	c := pgtest.Start(t)
	logs := &testutil.LogBuffer{}
	d := &db{dsn: c.DSN(), timeout: time.Nanosecond, attemptAtLeast: 200 * time.Millisecond, log: slog.New(slog.NewTextHandler(logs, nil))}
	t.Cleanup(d.close)
	ctx := context.Background()

	calls := 0
	err := d.do(ctx, "write batch", func(context.Context, *pgx.Conn) error {
		calls++
		return &pgconn.PgError{Code: "42P01", Message: `relation "t" does not exist`}
	})
	if calls != 1 || err == nil || !strings.HasPrefix(err.Error(), "eddy: pgsink: write batch: ") || !strings.Contains(err.Error(), `relation "t"`) {
		t.Errorf("a schema error: %d calls, %v; want one call and the error prefixed", calls, err)
	}

	done := make(chan error, 1)
	go func() {
		done <- d.do(ctx, "claim partitions", func(ctx context.Context, _ *pgx.Conn) error {
			<-ctx.Done() // a statement the database never answers
			return ctx.Err()
		})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "eddy: pgsink: claim partitions: the database failed for") {
			t.Errorf("a hanging attempt: %v, want the database's failure after the bound", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a hanging attempt was not cut")
	}
}

// A connection lost while NewWriter reads the table's columns is retried,
// as any lost connection; a table that does not fit the mapping, or that
// the server says is wrong (class 42), is not.
func TestWriterErrorRetry(t *testing.T) {
	for _, c := range []struct {
		err   error
		retry bool
	}{
		{fmt.Errorf("eddy: pgsink: table t: columns: %w", io.ErrUnexpectedEOF), true},
		{errors.New("eddy: pgsink: table t does not exist"), false},
		{errors.New("eddy: pgsink: table t: upsert needs key columns"), false},
		{fmt.Errorf("eddy: pgsink: table t: %w", &pgconn.PgError{Code: "42P01"}), false},
	} {
		if got := retryable(writerError(c.err)); got != c.retry {
			t.Errorf("retryable(writerError(%v)) = %v, want %v", c.err, got, c.retry)
		}
	}
}
