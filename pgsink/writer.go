package pgsink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// method is how a Writer sends a batch. Both send every value as text and
// cast it on the server to its column's type, so one code path serves
// every column type.
type method int

const (
	// viaUnnest sends each column as one text[] parameter and inserts
	// from unnest($1::text[], …): one statement, no temporary object, so
	// it also works in a transaction that is later PREPAREd (two-phase
	// commit refuses transactions that touched temporary tables).
	viaUnnest method = iota
	// viaCopy COPYs the batch into a temporary text table, then inserts
	// from it with INSERT … SELECT … ON CONFLICT. Measured slower than
	// viaUnnest here (BENCHMARKS.md), kept for the benchmark.
	viaCopy
)

// Writer writes batches of rows into one table, inside a transaction its
// caller owns: the sink commits the rows with its offsets, and an
// in-cycle sink can PREPARE the same transaction. It holds no connection
// and does not change after NewWriter: goroutines may share it.
type Writer struct {
	table  Table
	name   string // quoted, schema-qualified as to_regclass printed it
	cols   []column
	keyIdx []int // indexes in cols of the key columns
	method method

	upsertSQL, deleteSQL string
	stage                string // the viaCopy temporary table
	stageSQL, copySQL    string
}

// NewWriter validates t against the database (the table and every column
// named exist, upsert has a unique key on its key columns) and returns a
// Writer for it. q is a connection or a transaction.
func NewWriter(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, t Table) (*Writer, error) {
	name, cols, err := describe(ctx, q, t)
	if err != nil {
		return nil, err
	}
	w := &Writer{table: t, name: name, cols: cols}
	for i, c := range cols {
		if c.key {
			w.keyIdx = append(w.keyIdx, i)
		}
	}
	w.build()
	return w, nil
}

// Columns are the columns the Writer writes, in the table's order.
func (w *Writer) Columns() []string {
	names := make([]string, len(w.cols))
	for i, c := range w.cols {
		names[i] = c.name
	}
	return names
}

func ident(n string) string { return pgx.Identifier{n}.Sanitize() }

// build prepares the statements' text.
func (w *Writer) build() {
	var names, params, aliases, casts, sets, keys []string
	for i, c := range w.cols {
		names = append(names, ident(c.name))
		params = append(params, fmt.Sprintf("$%d::text[]", i+1))
		aliases = append(aliases, fmt.Sprintf("c%d", i+1))
		casts = append(casts, fmt.Sprintf("s.c%d::%s", i+1, c.typ))
		if c.key {
			keys = append(keys, ident(c.name))
		} else {
			sets = append(sets, fmt.Sprintf("%s = EXCLUDED.%s", ident(c.name), ident(c.name)))
		}
	}
	conflict := ""
	if w.table.Mode == Upsert {
		if len(sets) == 0 {
			conflict = fmt.Sprintf(" ON CONFLICT (%s) DO NOTHING", strings.Join(keys, ", "))
		} else {
			conflict = fmt.Sprintf(" ON CONFLICT (%s) DO UPDATE SET %s", strings.Join(keys, ", "), strings.Join(sets, ", "))
		}
	}
	w.upsertSQL = fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM unnest(%s) AS s(%s)%s",
		w.name, strings.Join(names, ", "), strings.Join(casts, ", "), strings.Join(params, ", "), strings.Join(aliases, ", "), conflict)

	var dparams, daliases, conds []string
	for j, i := range w.keyIdx {
		c := w.cols[i]
		dparams = append(dparams, fmt.Sprintf("$%d::text[]", j+1))
		daliases = append(daliases, fmt.Sprintf("c%d", j+1))
		conds = append(conds, fmt.Sprintf("t.%s = d.c%d::%s", ident(c.name), j+1, c.typ))
	}
	if len(w.keyIdx) > 0 {
		w.deleteSQL = fmt.Sprintf("DELETE FROM %s AS t USING unnest(%s) AS d(%s) WHERE %s",
			w.name, strings.Join(dparams, ", "), strings.Join(daliases, ", "), strings.Join(conds, " AND "))
	}

	w.stage = "eddy_stage_" + fmt.Sprintf("%x", fnv(w.name))
	var stageCols []string
	for _, a := range aliases {
		stageCols = append(stageCols, a+" text")
	}
	w.stageSQL = fmt.Sprintf("CREATE TEMP TABLE IF NOT EXISTS %s (%s) ON COMMIT DELETE ROWS", w.stage, strings.Join(stageCols, ", "))
	w.copySQL = fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s AS s%s",
		w.name, strings.Join(names, ", "), strings.Join(casts, ", "), w.stage, conflict)
}

func fnv(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

// RowError is a row's own fault: it does not map to the table's columns,
// or PostgreSQL refused it (a constraint or a value its column's type does
// not accept). Rows is the index of the row in the batch written.
type RowError struct {
	Row int
	Err error
}

func (e *RowError) Error() string { return fmt.Sprintf("row %d: %v", e.Row, e.Err) }
func (e *RowError) Unwrap() error { return e.Err }

// IsRowError reports whether err is a row's fault rather than the
// database's: a RowError, or a PostgreSQL data exception (class 22: a
// value its type does not read) or integrity constraint violation (class
// 23). Any other error (the connection, a serialization failure, a server
// shutting down) is not blamed on a row.
func IsRowError(err error) bool {
	var re *RowError
	if errors.As(err, &re) {
		return true
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && rowFault(pe.Code)
}

// rowFault reports whether a PostgreSQL error code is a row's fault, which
// a retry repeats: data exceptions (class 22), integrity violations (23),
// two rows of a batch that the table sees as one key (21000: keys equal
// as values, not as text), a value too large for an index (54000), and a
// trigger's RAISE (P0001).
func rowFault(code string) bool {
	return strings.HasPrefix(code, "22") || strings.HasPrefix(code, "23") ||
		code == "21000" || code == "54000" || code == "P0001"
}

// batch is rows laid out as the statements take them.
type batch struct {
	upserts [][]*string // per column
	deletes [][]*string // per key column
	n       int
}

// prepared is rows checked against the columns, as the text of each
// column's value (nil for NULL or a column not given), and whether each
// is a delete.
type prepared struct {
	texts [][]*string
	del   []bool
}

func (p *prepared) add(texts []*string, del bool) {
	p.texts = append(p.texts, texts)
	p.del = append(p.del, del)
}

func (p prepared) row(i int) prepared {
	return prepared{texts: p.texts[i : i+1], del: p.del[i : i+1]}
}

// rowTexts checks a row against the columns and returns its values' text
// per column. Its errors are the row's fault.
func (w *Writer) rowTexts(row Row) ([]*string, error) {
	if row.Delete && w.table.Mode == Append {
		return nil, errors.New("append mode: a tombstone has no row to delete")
	}
	vals := make([]*string, len(w.cols))
	seen := 0
	for i, c := range w.cols {
		v, ok := row.Values[c.name]
		if !ok {
			if c.key {
				return nil, fmt.Errorf("no value for key column %q", c.name)
			}
			continue
		}
		seen++
		t, err := textOf(v)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", c.name, err)
		}
		if t == nil && c.key {
			return nil, fmt.Errorf("key column %q is null", c.name)
		}
		vals[i] = t
	}
	if seen < len(row.Values) && !row.Delete {
		return nil, w.unknownFields(row)
	}
	return vals, nil
}

// prepare checks every row (rowTexts); the first bad one fails it with a
// RowError.
func (w *Writer) prepare(rows []Row) (prepared, error) {
	p := prepared{texts: make([][]*string, 0, len(rows)), del: make([]bool, 0, len(rows))}
	for r, row := range rows {
		t, err := w.rowTexts(row)
		if err != nil {
			return p, &RowError{Row: r, Err: err}
		}
		p.add(t, row.Delete)
	}
	return p, nil
}

// layout lays prepared rows out as the statements take them: in Upsert
// mode the last row of each key wins (an upsert or a delete), as log
// compaction keeps the last record of a key.
func (w *Writer) layout(p prepared) batch {
	b := batch{upserts: make([][]*string, len(w.cols)), deletes: make([][]*string, len(w.keyIdx))}
	keep := func(r int) bool { return true }
	if w.table.Mode == Upsert {
		last := make(map[string]int, len(p.texts))
		var k strings.Builder
		for r, vals := range p.texts {
			k.Reset()
			for _, i := range w.keyIdx {
				k.WriteString(*vals[i])
				k.WriteByte(0)
			}
			last[k.String()] = r
		}
		winners := make([]bool, len(p.texts))
		for _, r := range last {
			winners[r] = true
		}
		keep = func(r int) bool { return winners[r] }
	}
	for i := range b.upserts {
		b.upserts[i] = make([]*string, 0, len(p.texts))
	}
	for r, vals := range p.texts {
		if !keep(r) {
			continue
		}
		if p.del[r] {
			for j, i := range w.keyIdx {
				b.deletes[j] = append(b.deletes[j], vals[i])
			}
			continue
		}
		for i := range w.cols {
			b.upserts[i] = append(b.upserts[i], vals[i])
		}
		b.n++
	}
	return b
}

func (w *Writer) unknownFields(row Row) error {
	var extra []string
	for k := range row.Values {
		if !slices.ContainsFunc(w.cols, func(c column) bool { return c.name == k }) {
			extra = append(extra, k)
		}
	}
	slices.Sort(extra)
	return fmt.Errorf("table %s has no column %s", w.name, quoteList(extra))
}

// Write writes rows in tx, which the caller commits (or prepares). A row
// error fails the whole batch (the transaction must then be rolled back,
// or rolled back to a savepoint): WriteEach finds the rows at fault.
func (w *Writer) Write(ctx context.Context, tx pgx.Tx, rows []Row) error {
	p, err := w.prepare(rows)
	if err != nil {
		return err
	}
	return w.writePrepared(ctx, tx, p)
}

func (w *Writer) writePrepared(ctx context.Context, tx pgx.Tx, p prepared) error {
	b := w.layout(p)
	if len(b.deletes) > 0 && len(b.deletes[0]) > 0 {
		args := make([]any, len(b.deletes))
		for i, d := range b.deletes {
			args[i] = d
		}
		if _, err := tx.Exec(ctx, w.deleteSQL, args...); err != nil {
			return fmt.Errorf("eddy: pgsink: delete from %s: %w", w.name, err)
		}
	}
	if b.n == 0 {
		return nil
	}
	if w.method == viaCopy {
		return w.writeCopy(ctx, tx, b)
	}
	args := make([]any, len(b.upserts))
	for i, u := range b.upserts {
		args[i] = u
	}
	if _, err := tx.Exec(ctx, w.upsertSQL, args...); err != nil {
		return fmt.Errorf("eddy: pgsink: write to %s: %w", w.name, err)
	}
	return nil
}

func (w *Writer) writeCopy(ctx context.Context, tx pgx.Tx, b batch) error {
	if _, err := tx.Exec(ctx, w.stageSQL); err != nil {
		return fmt.Errorf("eddy: pgsink: staging table: %w", err)
	}
	names := make([]string, len(w.cols))
	for i := range names {
		names[i] = fmt.Sprintf("c%d", i+1)
	}
	r := -1
	src := pgx.CopyFromFunc(func() ([]any, error) {
		r++
		if r == b.n {
			return nil, nil
		}
		vals := make([]any, len(w.cols))
		for i := range w.cols {
			if t := b.upserts[i][r]; t != nil {
				vals[i] = *t
			}
		}
		return vals, nil
	})
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{w.stage}, names, src); err != nil {
		return fmt.Errorf("eddy: pgsink: copy to staging table: %w", err)
	}
	if _, err := tx.Exec(ctx, w.copySQL); err != nil {
		return fmt.Errorf("eddy: pgsink: write to %s: %w", w.name, err)
	}
	if _, err := tx.Exec(ctx, "TRUNCATE "+w.stage); err != nil {
		return fmt.Errorf("eddy: pgsink: staging table: %w", err)
	}
	return nil
}

// WriteEach writes rows one by one in tx, each under a savepoint, to find
// the rows at fault after Write failed with a row error: it returns, per
// row, nil or its error (the row is then not written, the others are).
// An error not a row's fault (see IsRowError) stops it and is returned as
// err; tx must then be rolled back.
func (w *Writer) WriteEach(ctx context.Context, tx pgx.Tx, rows []Row) (rowErrs []error, err error) {
	rowErrs = make([]error, len(rows))
	var p prepared
	var at []int // index in rows of each prepared row
	for i, row := range rows {
		t, err := w.rowTexts(row)
		if err != nil {
			rowErrs[i] = err
			continue
		}
		p.add(t, row.Delete)
		at = append(at, i)
	}
	errs, err := w.writeEach(ctx, tx, p)
	if err != nil {
		return nil, err
	}
	for j, e := range errs {
		rowErrs[at[j]] = e
	}
	return rowErrs, nil
}

func (w *Writer) writeEach(ctx context.Context, tx pgx.Tx, p prepared) ([]error, error) {
	rowErrs := make([]error, len(p.texts))
	for i := range p.texts {
		if _, err := tx.Exec(ctx, "SAVEPOINT eddy_row"); err != nil {
			return nil, fmt.Errorf("eddy: pgsink: savepoint: %w", err)
		}
		werr := w.writePrepared(ctx, tx, p.row(i))
		if werr == nil {
			if _, err := tx.Exec(ctx, "RELEASE SAVEPOINT eddy_row"); err != nil {
				return nil, fmt.Errorf("eddy: pgsink: savepoint: %w", err)
			}
			continue
		}
		if !IsRowError(werr) {
			return nil, werr
		}
		rowErrs[i] = werr
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT eddy_row"); err != nil {
			return nil, fmt.Errorf("eddy: pgsink: savepoint: %w", err)
		}
	}
	return rowErrs, nil
}
