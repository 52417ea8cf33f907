package pgsink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// db is one connection that reconnects: do runs a unit of work on it and,
// when the database fails (down, restarting, refusing the credentials, a
// broken connection), logs, waits with backoff and runs it again, until
// timeout has passed since the first failure. A unit of work must
// therefore be one transaction that is safe to redo.
type db struct {
	dsn     string
	timeout time.Duration
	// timeoutName is the setting timeout comes from, which the error
	// after it names ("--db-timeout", "CycleConfig.Timeout").
	timeoutName string
	log         *slog.Logger
	// setup runs on each new connection.
	setup []string
	// attemptAtLeast is how long one attempt may take at least (default
	// 30 s; see attempt): the sink sets it to wait for the lock of a
	// partition whose previous owner froze mid-transaction.
	attemptAtLeast time.Duration
	conn           *pgx.Conn
}

// permanent marks an error that retrying cannot cure: do returns it at
// once.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// retryable reports whether err is the database's passing trouble rather
// than something a retry repeats: a row's fault (rowFault), an error of
// the statement or schema (class 42: a table dropped under the sink),
// a cardinality violation (class 21: left after the Writer's
// de-duplication, it comes from the schema, such as a trigger's
// subquery, and would come again) and the sink's own permanent errors
// are not.
func retryable(err error) bool {
	var p permanent
	if errors.As(err, &p) || errors.Is(err, context.Canceled) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (rowFault(pe.Code) || strings.HasPrefix(pe.Code, "42") || strings.HasPrefix(pe.Code, "21")) {
		return false
	}
	var re *RowError
	return !errors.As(err, &re)
}

// writerError is NewWriter's error as db.do should take it: a table that
// does not fit the mapping (an error of NewWriter's own, wrapping nothing)
// is permanent, no retry cures it; one that wraps the server's or the
// connection's error is classed by retryable (a connection lost while the
// columns were read — "unexpected EOF" once failed a sink's recovery in
// CI — is retried).
func writerError(err error) error {
	if errors.Unwrap(err) == nil {
		return permanent{err}
	}
	return err
}

func backoff(fails int) time.Duration {
	d := 100 * time.Millisecond << min(fails, 6)
	return min(d, 5*time.Second)
}

func (d *db) connect(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, d.dsn)
	if err != nil {
		return err
	}
	for _, s := range d.setup {
		if _, err := conn.Exec(cctx, s); err != nil {
			conn.Close(ctx)
			return err
		}
	}
	d.conn = conn
	return nil
}

// attempt is one run of f, on a connection opened if needed, within the
// timeout or attemptAtLeast, the longer (a short timeout means giving up
// on the first failure, not cutting a unit of work short).
func (d *db) attempt(ctx context.Context, f func(context.Context, *pgx.Conn) error) error {
	bound := d.attemptAtLeast
	if bound <= 0 {
		bound = 30 * time.Second
	}
	actx, cancel := context.WithTimeout(ctx, max(d.timeout, bound))
	defer cancel()
	if d.conn == nil || d.conn.IsClosed() {
		if err := d.connect(actx); err != nil {
			return err
		}
	}
	return f(actx, d.conn)
}

func (d *db) close() {
	if d.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		d.conn.Close(ctx)
		cancel()
		d.conn = nil
	}
}

// do runs f, redoing it while the database fails, as db says. Each
// attempt is bounded too (see attempt): a database that stops answering
// without closing the connection (a host or network gone) fails the
// attempt instead of hanging it, and the time it hung counts as failing.
func (d *db) do(ctx context.Context, what string, f func(context.Context, *pgx.Conn) error) error {
	var first time.Time
	for fails := 0; ; fails++ {
		start := time.Now()
		err := d.attempt(ctx, f)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !retryable(err) {
			var p permanent
			if errors.As(err, &p) || strings.HasPrefix(err.Error(), "eddy: ") {
				return err
			}
			return fmt.Errorf("eddy: pgsink: %s: %w", what, err)
		}
		// A failed connection may be left in an unknown state: start over.
		d.close()
		if first.IsZero() {
			first = start
		}
		if waited := time.Since(first); waited >= d.timeout {
			return fmt.Errorf("eddy: pgsink: %s: the database failed for %v (%s): %w", what, waited.Round(time.Second), d.timeoutName, err)
		}
		wait := backoff(fails)
		d.log.Warn("pgsink: database unavailable, retrying", "what", what, "err", err, "retry_in", wait, "failing_for", time.Since(first).Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// CreateTables creates the tables of create (a table's name → its
// CREATE TABLE statement) that do not exist yet on the database at dsn,
// as the sinks create their own: a database that fails (down,
// restarting) is logged and retried with backoff for timeout, and a table
// another process created at the same moment counts as created. An app
// that creates the tables its sinks write to calls it at start.
func CreateTables(ctx context.Context, dsn string, timeout time.Duration, log *slog.Logger, create map[string]string) error {
	d := &db{dsn: dsn, timeout: timeout, timeoutName: "the timeout of CreateTables", log: log}
	defer d.close()
	return d.do(ctx, "create tables", func(ctx context.Context, conn *pgx.Conn) error {
		for _, table := range slices.Sorted(maps.Keys(create)) {
			if err := createIfMissing(ctx, conn, table, create[table]); err != nil {
				return err
			}
		}
		return nil
	})
}
