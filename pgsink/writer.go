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
	// viaUnnestByValue writes every upsert batch with the statement that
	// de-duplicates keys in the database (writeByValue), which is
	// otherwise only used when it is needed: for the tests and the
	// benchmark.
	viaUnnestByValue
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
	byValueSQL           string // Upsert: see writeByValue
	stage                string // the viaCopy temporary table
	stageSQL, copySQL    string
}

// NewWriter validates t against the database (the table and every column
// named exist, upsert has a unique key on its key columns) and returns a
// Writer for it. q is what reads the catalog: a *pgx.Conn, a pgx.Tx or a
// *pgxpool.Pool (anything with pgx's Query and QueryRow).
func NewWriter(ctx context.Context, q queryer, t Table) (*Writer, error) {
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

	if w.table.Mode == Upsert {
		w.byValueSQL = w.byValue(conflict)
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

// byValue is the upsert statement that de-duplicates the batch in the
// database. Its parameters are a text[] per column and a bool[] marking
// the deletes. The keys are cast to their types before DISTINCT ON, so
// that the types' own equality decides which rows are one key; the other
// columns are cast after it, only for the rows kept. The deletes and the
// inserts it keeps are of distinct keys, so the two can run in one
// statement.
func (w *Writer) byValue(conflict string) string {
	var params, aliases, inner, distinct, outer, names, conds []string
	for i, c := range w.cols {
		a := fmt.Sprintf("c%d", i+1)
		params = append(params, fmt.Sprintf("$%d::text[]", i+1))
		aliases = append(aliases, a)
		names = append(names, ident(c.name))
		if c.key {
			inner = append(inner, fmt.Sprintf("u.%s::%s AS %s", a, c.typ, a))
			distinct = append(distinct, a)
			outer = append(outer, "s."+a)
			conds = append(conds, fmt.Sprintf("t.%s = s.%s", ident(c.name), a))
		} else {
			inner = append(inner, "u."+a)
			outer = append(outer, fmt.Sprintf("s.%s::%s", a, c.typ))
		}
	}
	n := len(w.cols)
	return fmt.Sprintf(`WITH s AS (SELECT DISTINCT ON (%[1]s) * FROM (SELECT %[2]s, u.del, u.ord FROM unnest(%[3]s, $%[4]d::bool[]) WITH ORDINALITY AS u(%[5]s, del, ord)) v ORDER BY %[1]s, ord DESC), `+
		`d AS (DELETE FROM %[6]s AS t USING s WHERE s.del AND %[7]s) `+
		`INSERT INTO %[6]s (%[8]s) SELECT %[9]s FROM s WHERE NOT s.del%[10]s`,
		strings.Join(distinct, ", "), strings.Join(inner, ", "), strings.Join(params, ", "), n+1, strings.Join(aliases, ", "),
		w.name, strings.Join(conds, " AND "), strings.Join(names, ", "), strings.Join(outer, ", "), conflict)
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
// not accept). Row is the index of the row in the batch written.
type RowError struct {
	Row int
	Err error
}

func (e *RowError) Error() string { return fmt.Sprintf("eddy: pgsink: row %d: %v", e.Row, e.Err) }
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
// a value too large for an index (54000), and a trigger's RAISE (P0001).
// Not 21000 (cardinality_violation): two rows of a batch that the table
// sees as one key are de-duplicated by the Writer (writeChecked), and a
// batch redone row by row would only find each row good on its own.
func rowFault(code string) bool {
	return strings.HasPrefix(code, "22") || strings.HasPrefix(code, "23") ||
		code == "54000" || code == "P0001"
}

// checkedRows is rows checked against the columns, as the text of each
// column's value (nil for NULL or a column not given), and whether each
// is a delete.
type checkedRows struct {
	texts [][]*string
	del   []bool
}

func (p *checkedRows) add(texts []*string, del bool) {
	p.texts = append(p.texts, texts)
	p.del = append(p.del, del)
}

func (p checkedRows) slice(lo, hi int) checkedRows {
	return checkedRows{texts: p.texts[lo:hi], del: p.del[lo:hi]}
}

// checkRow checks a row against the columns and returns its values' text
// per column. Its errors are the row's fault.
func (w *Writer) checkRow(row Row) ([]*string, error) {
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

// checkRows checks every row (checkRow); the first bad one fails it with a
// RowError.
func (w *Writer) checkRows(rows []Row) (checkedRows, error) {
	p := checkedRows{texts: make([][]*string, 0, len(rows)), del: make([]bool, 0, len(rows))}
	for r, row := range rows {
		t, err := w.checkRow(row)
		if err != nil {
			return p, &RowError{Row: r, Err: err}
		}
		p.add(t, row.Delete)
	}
	return p, nil
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

// checkFields checks that each of the fields every value holds is a
// column written: otherwise every record would be a bad record.
func (w *Writer) checkFields(fields []string) error {
	var missing []string
	for _, f := range fields {
		if !slices.ContainsFunc(w.cols, func(c column) bool { return c.name == f }) {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("eddy: pgsink: table %s has no column %s written for the value schema's fields (every record would be a bad record): add the column, or list it in the columns written (Table.Columns, --columns)", w.name, quoteList(missing))
	}
	return nil
}

// Write writes rows in tx, which the caller commits (or prepares). A row
// error fails the whole batch (the transaction must then be rolled back,
// or rolled back to a savepoint): WriteEach finds the rows at fault.
func (w *Writer) Write(ctx context.Context, tx pgx.Tx, rows []Row) error {
	p, err := w.checkRows(rows)
	if err != nil {
		return err
	}
	return w.writeChecked(ctx, tx, p)
}

// lastPerKey is the indexes of the rows to write, in the batch's order: in
// Upsert mode the last row of each key (an upsert or a delete), as log
// compaction keeps the last record of a key, comparing the keys' text;
// every row in Append mode. Keys equal as values but not as text (a uuid
// in two cases, numeric 1 and 1.0, citext) are left to the database: see
// writeByValue.
func (w *Writer) lastPerKey(p checkedRows) []int {
	all := make([]int, 0, len(p.texts))
	if w.table.Mode != Upsert {
		for r := range p.texts {
			all = append(all, r)
		}
		return all
	}
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
	for _, r := range last {
		all = append(all, r)
	}
	slices.Sort(all)
	return all
}

// columnArgs is the rows' values as the statements' parameters: one text
// array per column in cols (the indexes in w.cols), of the rows picked.
func (w *Writer) columnArgs(p checkedRows, rows []int, cols []int) []any {
	args := make([]any, len(cols))
	for j, i := range cols {
		vals := make([]*string, len(rows))
		for n, r := range rows {
			vals[n] = p.texts[r][i]
		}
		args[j] = vals
	}
	return args
}

// writeChecked writes checked rows in tx: the last row of each key (see
// lastPerKey), deletes and upserts, with the fewest statements that keep
// the batch's order of one key whatever its text.
func (w *Writer) writeChecked(ctx context.Context, tx pgx.Tx, p checkedRows) error {
	rows := w.lastPerKey(p)
	var dels, ups []int
	for _, r := range rows {
		if p.del[r] {
			dels = append(dels, r)
		} else {
			ups = append(ups, r)
		}
	}
	switch {
	case len(dels) > 0 && len(ups) > 0:
		// A delete and an upsert of one key written as two texts must
		// apply in the batch's order, and only the database can tell
		// that they are one key.
		return w.writeByValue(ctx, tx, p, rows)
	case len(dels) > 0:
		if _, err := tx.Exec(ctx, w.deleteSQL, w.columnArgs(p, dels, w.keyIdx)...); err != nil {
			return fmt.Errorf("eddy: pgsink: delete from %s: %w", w.name, err)
		}
		return nil
	case len(ups) == 0:
		return nil
	}
	if w.method == viaUnnestByValue && w.table.Mode == Upsert {
		return w.writeByValue(ctx, tx, p, ups)
	}
	if !w.mayAffectTwice(len(ups)) {
		return w.insert(ctx, tx, p, ups)
	}
	// Rows whose keys differ as text may still be one key to the table:
	// PostgreSQL then refuses the statement (21000, "ON CONFLICT DO
	// UPDATE command cannot affect row a second time"). Try the fast
	// statement under a savepoint, and redo the batch de-duplicated by
	// the database when it is refused so.
	if _, err := tx.Exec(ctx, "SAVEPOINT eddy_upsert"); err != nil {
		return fmt.Errorf("eddy: pgsink: savepoint: %w", err)
	}
	err := w.insert(ctx, tx, p, ups)
	if isAffectedTwice(err) {
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT eddy_upsert"); err != nil {
			return fmt.Errorf("eddy: pgsink: savepoint: %w", err)
		}
		err = w.writeByValue(ctx, tx, p, ups)
	}
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "RELEASE SAVEPOINT eddy_upsert"); err != nil {
		return fmt.Errorf("eddy: pgsink: savepoint: %w", err)
	}
	return nil
}

// mayAffectTwice reports whether an upsert of n rows, distinct as text,
// can be refused for updating one row twice.
func (w *Writer) mayAffectTwice(n int) bool {
	return n > 1 && w.table.Mode == Upsert && len(w.keyIdx) < len(w.cols)
}

// isAffectedTwice reports whether err is PostgreSQL's refusal of an
// INSERT … ON CONFLICT DO UPDATE whose rows hold one key twice
// (cardinality_violation).
func isAffectedTwice(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "21000"
}

// insert writes the upsert rows with the fast statement (keys already
// distinct as text).
func (w *Writer) insert(ctx context.Context, tx pgx.Tx, p checkedRows, rows []int) error {
	all := make([]int, len(w.cols))
	for i := range all {
		all[i] = i
	}
	args := w.columnArgs(p, rows, all)
	if w.method == viaCopy {
		return w.writeCopy(ctx, tx, args, len(rows))
	}
	if _, err := tx.Exec(ctx, w.upsertSQL, args...); err != nil {
		return fmt.Errorf("eddy: pgsink: write to %s: %w", w.name, err)
	}
	return nil
}

// writeByValue writes rows (upserts and deletes) in one statement that
// keeps the last row of each key as PostgreSQL's equality of the key
// columns' types sees them: DISTINCT ON the keys cast to their types,
// latest first.
func (w *Writer) writeByValue(ctx context.Context, tx pgx.Tx, p checkedRows, rows []int) error {
	args := make([]any, len(w.cols)+1)
	del := make([]bool, len(rows))
	for n, r := range rows {
		del[n] = p.del[r]
	}
	for i, c := range w.cols {
		vals := make([]*string, len(rows))
		for n, r := range rows {
			if !del[n] || c.key {
				vals[n] = p.texts[r][i] // a delete's other columns are not read
			}
		}
		args[i] = vals
	}
	args[len(w.cols)] = del
	if _, err := tx.Exec(ctx, w.byValueSQL, args...); err != nil {
		return fmt.Errorf("eddy: pgsink: write to %s: %w", w.name, err)
	}
	return nil
}

func (w *Writer) writeCopy(ctx context.Context, tx pgx.Tx, args []any, n int) error {
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
		if r == n {
			return nil, nil
		}
		vals := make([]any, len(w.cols))
		for i := range w.cols {
			if t := args[i].([]*string)[r]; t != nil {
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

// WriteEach writes rows in tx after Write failed with a row error, to find
// the rows at fault: it returns, per row, nil or its error (the row is
// then not written, the others are). An error not a row's fault (see
// IsRowError) stops it and is returned as err; tx must then be rolled
// back.
func (w *Writer) WriteEach(ctx context.Context, tx pgx.Tx, rows []Row) (rowErrs []error, err error) {
	rowErrs = make([]error, len(rows))
	var p checkedRows
	var at []int // index in rows of each checked row
	for i, row := range rows {
		t, err := w.checkRow(row)
		if err != nil {
			rowErrs[i] = &RowError{Row: i, Err: err}
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

// writeEach finds the rows of p at fault by bisection: each half is
// written under a savepoint, and a half the table refuses is rolled back
// and split again, down to the single rows to blame. A batch of n rows
// with k refused takes about 2k·log2(n/k) statements instead of n, so
// that one bad row in a large transaction costs a few dozen round trips,
// not one per row (which, to a distant database, could outlast the Kafka
// transaction's timeout).
func (w *Writer) writeEach(ctx context.Context, tx pgx.Tx, p checkedRows) ([]error, error) {
	rowErrs := make([]error, len(p.texts))
	var find func(lo, hi int) error
	find = func(lo, hi int) error {
		if _, err := tx.Exec(ctx, "SAVEPOINT eddy_part"); err != nil {
			return fmt.Errorf("eddy: pgsink: savepoint: %w", err)
		}
		werr := w.writeChecked(ctx, tx, p.slice(lo, hi))
		if werr == nil {
			if _, err := tx.Exec(ctx, "RELEASE SAVEPOINT eddy_part"); err != nil {
				return fmt.Errorf("eddy: pgsink: savepoint: %w", err)
			}
			return nil
		}
		if !IsRowError(werr) {
			return werr
		}
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT eddy_part; RELEASE SAVEPOINT eddy_part"); err != nil {
			return fmt.Errorf("eddy: pgsink: savepoint: %w", err)
		}
		if hi-lo == 1 {
			rowErrs[lo] = werr
			return nil
		}
		mid := (lo + hi) / 2
		if err := find(lo, mid); err != nil {
			return err
		}
		return find(mid, hi)
	}
	// The whole batch failed already: start from its halves.
	n := len(p.texts)
	for _, half := range [2][2]int{{0, n / 2}, {n / 2, n}} {
		if half[0] == half[1] {
			continue
		}
		if err := find(half[0], half[1]); err != nil {
			return nil, err
		}
	}
	return rowErrs, nil
}
