package pgsink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eddy-streams/eddy"
)

// TasksTable is the table where the in-cycle sink (To) keeps each task's
// owner epoch, per app and sink: the fence against a task's earlier owner
// still writing.
const TasksTable = "eddy_sink_tasks"

// CycleConfig configures To.
type CycleConfig[K, V any] struct {
	// DSN is the database's connection string (pgx's: a URL or
	// key=value pairs).
	DSN string
	// Table is where and how the rows are written.
	Table Table
	// Rows maps a record to its row (a tombstone's to a Row with Delete
	// set, giving the key columns). An error is the record's fault: the
	// app's produce-error policy (Config.OnProduceError) decides.
	Rows func(eddy.Record[K, V]) (Row, error)
	// Timeout bounds how long a database that fails (down, restarting,
	// refusing the credentials) is retried before the app stops with an
	// error. Default 2 minutes.
	Timeout time.Duration
	// Logger receives the retries' warnings. Default slog.Default().
	Logger *slog.Logger
}

// To writes s into cfg.Table exactly once, in step with the task's Kafka
// transactions: a two-phase commit on eddy.ToTransactional. Each task's
// rows of a Kafka transaction are written in one PostgreSQL transaction,
// prepared (PREPARE TRANSACTION) before the Kafka transaction commits,
// named by a global id that the task's changelog records inside the
// Kafka transaction, and committed (COMMIT PREPARED) after it; a task that
// opens after a crash commits the prepared transaction its changelog
// names and rolls back the task's others. An epoch per task in TasksTable,
// raised by each new owner and checked by each prepare, fences an owner
// that lost the task. The server must allow prepared transactions:
// max_prepared_transactions at least the number of tasks writing at once,
// times the sinks per task (each holds at most one); with 0, the task
// fails at open with an error saying so. The rows of different tasks (and
// sinks) must not overlap (key the table as the stream is partitioned): a
// row another task's prepared transaction holds makes the prepare wait,
// then fail. Under eddy.AtLeastOnce the rows are written at least once.
func To[K, V any](s eddy.Stream[K, V], name string, cfg CycleConfig[K, V]) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	eddy.ToTransactional(s, name, func(task eddy.SinkTask) (eddy.TransactionalSink[K, V], error) {
		if cfg.Rows == nil {
			return nil, errors.New("eddy: pgsink: CycleConfig.Rows is nil: pass the function that maps a record to its row")
		}
		return &cycleSink[K, V]{cfg: cfg, task: task,
			db: &db{dsn: cfg.DSN, timeout: cfg.Timeout, timeoutName: "CycleConfig.Timeout", log: cfg.Logger.With("sink", name, "task", task.Task)}}, nil
	})
}

// cycleSink is one task's sink.
type cycleSink[K, V any] struct {
	cfg    CycleConfig[K, V]
	task   eddy.SinkTask
	db     *db
	writer *Writer
	epoch  int64
	seq    int64
	rows   []Row
}

// gidPrefix is what the global ids of the task's prepared transactions
// start with: eddy:<app>:<sink>:<task>:. App ids and sink names are Kafka
// names ([a-zA-Z0-9._-]) and task ids digits and "_", so ':' separates
// them.
func (s *cycleSink[K, V]) gidPrefix() string {
	return "eddy:" + s.task.AppID + ":" + s.task.Sink + ":" + s.task.Task + ":"
}

func (s *cycleSink[K, V]) Recover(committed []byte) error {
	ctx := context.Background()
	err := s.db.do(ctx, "recover", func(ctx context.Context, conn *pgx.Conn) error {
		if n := len(s.gidPrefix()) + 40; n > 200 {
			return permanent{fmt.Errorf("eddy: pgsink: app id and sink name too long: the prepared transactions' ids would take %d bytes, PostgreSQL's limit is 200", n)}
		}
		var maxPrepared string
		if err := conn.QueryRow(ctx, "SHOW max_prepared_transactions").Scan(&maxPrepared); err != nil {
			return err
		}
		if maxPrepared == "0" {
			return permanent{fmt.Errorf("eddy: pgsink: the server's max_prepared_transactions is 0, so it refuses PREPARE TRANSACTION: set it to at least the number of tasks that write to it times their sinks (e.g. max_prepared_transactions = 64 in postgresql.conf) and restart PostgreSQL")}
		}
		if err := createIfMissing(ctx, conn, TasksTable, `CREATE TABLE IF NOT EXISTS `+TasksTable+` (app text NOT NULL, sink text NOT NULL, task text NOT NULL, epoch bigint NOT NULL, PRIMARY KEY (app, sink, task))`); err != nil {
			return err
		}
		w, err := NewWriter(ctx, conn, s.cfg.Table)
		if err != nil {
			return writerError(err)
		}
		s.writer = w
		// Resolve, then raise the epoch. A zombie may prepare in
		// between (holding the epoch row's lock until resolved): the
		// raise then times out on the lock, and the zombie's
		// transaction, which no committed changelog names, is rolled
		// back by the next round.
		for start := time.Now(); ; {
			if err := s.resolve(ctx, conn, string(committed)); err != nil {
				return err
			}
			epoch, err := raiseEpoch(ctx, conn, s.task)
			if isLockTimeout(err) && time.Since(start) < s.cfg.Timeout {
				s.db.log.Warn("pgsink: the task's epoch row is locked (an earlier owner's transaction?); resolving again", "waited", time.Since(start).Round(time.Millisecond))
				continue
			}
			if err != nil {
				return err
			}
			s.epoch, s.seq = epoch, 0
			return nil
		}
	})
	if err != nil {
		return wrapUnavailable(err)
	}
	return nil
}

// resolve commits the task's prepared transaction named committed (its
// Kafka transaction committed) and rolls back the others.
func (s *cycleSink[K, V]) resolve(ctx context.Context, conn *pgx.Conn, committed string) error {
	rows, err := conn.Query(ctx, `SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND starts_with(gid, $1)`, s.gidPrefix())
	if err != nil {
		return err
	}
	gids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, gid := range gids {
		verb := "ROLLBACK"
		if gid == committed {
			verb = "COMMIT"
		}
		if _, err := conn.Exec(ctx, verb+" PREPARED "+quoteLiteral(gid)); err != nil && !isUndefinedObject(err) {
			return err
		}
		s.db.log.Info("pgsink: resolved a prepared transaction left by an earlier owner", "gid", gid, "outcome", strings.ToLower(verb))
	}
	return nil
}

// raiseEpoch makes the caller the task's owner: the epoch goes up by one
// (from 1 for a new task), waiting at most a second for the row's lock.
func raiseEpoch(ctx context.Context, conn *pgx.Conn, task eddy.SinkTask) (int64, error) {
	var epoch int64
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '1s'"); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO `+TasksTable+` AS t (app, sink, task, epoch) VALUES ($1, $2, $3, 1)
			ON CONFLICT (app, sink, task) DO UPDATE SET epoch = t.epoch + 1 RETURNING epoch`, task.AppID, task.Sink, task.Task).Scan(&epoch)
	})
	return epoch, err
}

func (s *cycleSink[K, V]) Write(r eddy.Record[K, V]) error {
	row, err := s.cfg.Rows(r)
	if err != nil {
		return err
	}
	s.rows = append(s.rows, row)
	return nil
}

func (s *cycleSink[K, V]) Prepare() ([]byte, []eddy.Refusal, error) {
	if len(s.rows) == 0 {
		return nil, nil, nil
	}
	s.seq++
	gid := s.gidPrefix() + strconv.FormatInt(s.epoch, 10) + ":" + strconv.FormatInt(s.seq, 10)
	ctx := context.Background()
	// refused is set just before PREPARE TRANSACTION is sent: if its
	// answer is lost, the next attempt finds the transaction prepared
	// with what this one refused.
	var refused []eddy.Refusal
	err := s.db.do(ctx, "prepare", func(ctx context.Context, conn *pgx.Conn) error {
		// Redone after a lost answer, the transaction may be prepared
		// already: writing its rows again would wait for its locks.
		var done bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_prepared_xacts WHERE gid = $1)`, gid).Scan(&done); err != nil || done {
			return err
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx) // a no-op once prepared
		// A row another prepared transaction holds (another task's or
		// sink's: their rows must not overlap) would wait until that one
		// commits, after the Kafka transaction that waits for this
		// prepare: wait a bounded time, then retry, then fail. A
		// deferred constraint would fail PREPARE TRANSACTION itself,
		// past the search that finds the record at fault:
		// check every one at its row.
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '5s'; SET CONSTRAINTS ALL IMMEDIATE"); err != nil {
			return err
		}
		var epoch int64
		err = tx.QueryRow(ctx, `SELECT epoch FROM `+TasksTable+` WHERE app = $1 AND sink = $2 AND task = $3 FOR SHARE`, s.task.AppID, s.task.Sink, s.task.Task).Scan(&epoch)
		if err != nil {
			return err
		}
		if epoch != s.epoch {
			return permanent{fmt.Errorf("eddy: pgsink: task %s: %w (its epoch is %d, ours %d)", s.task.Task, eddy.ErrSinkFenced, epoch, s.epoch)}
		}
		rowErrs, err := s.write(ctx, tx)
		if err != nil {
			return err
		}
		refused = refused[:0]
		for i, e := range rowErrs {
			if e != nil {
				refused = append(refused, eddy.Refusal{Write: i, Err: e})
			}
		}
		_, err = tx.Exec(ctx, "PREPARE TRANSACTION "+quoteLiteral(gid))
		if isDuplicateObject(err) {
			return nil // an earlier attempt prepared it, its answer lost
		}
		return err
	})
	if err != nil {
		return nil, nil, wrapUnavailable(err)
	}
	s.rows = s.rows[:0]
	return []byte(gid), refused, nil
}

// write writes the rows in tx. If the table refuses some (a value its
// column's type refuses, a constraint), it writes them again by halves
// to find which: rowErrs then holds, per row, nil or why it was refused.
func (s *cycleSink[K, V]) write(ctx context.Context, tx pgx.Tx) (rowErrs []error, err error) {
	if _, err := tx.Exec(ctx, "SAVEPOINT eddy_rows"); err != nil {
		return nil, err
	}
	err = s.writer.Write(ctx, tx, s.rows)
	if err == nil || !IsRowError(err) {
		return nil, err
	}
	if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT eddy_rows"); err != nil {
		return nil, err
	}
	return s.writer.WriteEach(ctx, tx, s.rows)
}

func (s *cycleSink[K, V]) Commit(token []byte) error {
	return s.finish("COMMIT", token)
}

func (s *cycleSink[K, V]) Abort(token []byte) error {
	s.rows = s.rows[:0]
	if token == nil {
		return nil
	}
	return s.finish("ROLLBACK", token)
}

// finish ends the prepared transaction token: redone after a lost answer,
// a transaction that no longer exists is done. Gone at the first attempt,
// it was ended by someone else: a newer owner of the task, whose Recover
// decided from the changelog (this instance is a zombie: fenced), or,
// when the epoch is still ours, someone outside eddy, which is logged as
// an error: if they rolled it back, a committed Kafka transaction's rows
// are lost.
func (s *cycleSink[K, V]) finish(verb string, token []byte) error {
	attempts := 0
	err := s.db.do(context.Background(), strings.ToLower(verb)+" prepared", func(ctx context.Context, conn *pgx.Conn) error {
		attempts++
		_, err := conn.Exec(ctx, verb+" PREPARED "+quoteLiteral(string(token)))
		if !isUndefinedObject(err) {
			return err
		}
		if attempts > 1 {
			s.db.log.Info("pgsink: the prepared transaction was already ended (an earlier attempt's answer was lost)", "gid", string(token), "wanted", strings.ToLower(verb))
			return nil
		}
		var epoch int64
		err = conn.QueryRow(ctx, `SELECT epoch FROM `+TasksTable+` WHERE app = $1 AND sink = $2 AND task = $3`, s.task.AppID, s.task.Sink, s.task.Task).Scan(&epoch)
		switch {
		case err != nil:
			return err
		case epoch != s.epoch && verb == "COMMIT":
			return permanent{fmt.Errorf("eddy: pgsink: task %s: %w: a newer owner ended the prepared transaction %s (its epoch is %d, ours %d)", s.task.Task, eddy.ErrSinkFenced, token, epoch, s.epoch)}
		case epoch == s.epoch:
			s.db.log.Error("pgsink: the prepared transaction was ended outside eddy; if it was rolled back, the rows of a committed Kafka transaction are lost", "gid", string(token), "wanted", strings.ToLower(verb))
		}
		return nil
	})
	return wrapUnavailable(err)
}

func (s *cycleSink[K, V]) Close() error {
	s.db.close()
	return nil
}

// wrapUnavailable marks the database's failures as not the records'
// (eddy.ErrSinkUnavailable): a row's fault (IsRowError) is left as it is.
func wrapUnavailable(err error) error {
	if err == nil || IsRowError(err) || errors.Is(err, eddy.ErrSinkFenced) {
		return err
	}
	return unavailable{err}
}

// unavailable is a database failure: its message is the failure's, and it
// is eddy.ErrSinkUnavailable too.
type unavailable struct{ err error }

func (u unavailable) Error() string   { return u.err.Error() }
func (u unavailable) Unwrap() []error { return []error{u.err, eddy.ErrSinkUnavailable} }

// quoteLiteral quotes s as an SQL string literal (the gid of PREPARE
// TRANSACTION and COMMIT PREPARED cannot be a parameter).
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func isUndefinedObject(err error) bool { return pgCode(err) == "42704" }
func isDuplicateObject(err error) bool { return pgCode(err) == "42710" }
func isLockTimeout(err error) bool     { return pgCode(err) == "55P03" }
