package pgsink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Mode is how a Writer applies a row to its table.
type Mode int

const (
	// Upsert inserts a row or, when a row with its key exists, updates
	// it (INSERT … ON CONFLICT DO UPDATE). Within one batch the last row
	// of a key wins, as Kafka's log compaction would keep it; a delete
	// (a tombstone) removes the key's row. It needs a primary key or a
	// unique index on exactly the key columns. The default.
	Upsert Mode = iota
	// Append inserts every row, keeping each record as its own row; its
	// exactly-once comes from the sink's offsets, kept in the same
	// transaction. A delete is refused (a row error): an append table
	// has no row to delete by key.
	Append
)

func (m Mode) String() string {
	switch m {
	case Upsert:
		return "upsert"
	case Append:
		return "append"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode reads "upsert" or "append".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "upsert":
		return Upsert, nil
	case "append":
		return Append, nil
	}
	return 0, fmt.Errorf("eddy: pgsink: mode %q: want upsert or append", s)
}

// Table says where and how rows are written.
type Table struct {
	// Name is the table, optionally schema-qualified ("public.balances"),
	// parsed as PostgreSQL parses a name: unquoted parts fold to lower
	// case.
	Name string
	// Key names the key columns. With JSONMapper the record key fills a
	// single key column; several key columns come from the value's
	// fields, and deleting by them needs a Mapper of one's own (a
	// tombstone has no value). Upsert needs them; Append may leave them
	// empty.
	Key []string
	// Mode is Upsert (the default) or Append.
	Mode Mode
	// Columns are the columns a row fills, key columns included. Empty
	// means every column of the table that can be written (not generated,
	// not identity ALWAYS). A column a row does not give is written NULL,
	// so list the columns to keep a column's DEFAULT (a serial id, a
	// timestamp) in an append table.
	Columns []string
}

// column is a column a Writer writes: its name and its type as SQL spells
// it, for the cast from the text a row's value is sent as.
type column struct {
	name, typ string
	key       bool
}

// queryer is what validation needs of a connection or transaction.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// describe validates t against the database's catalog and returns the
// table's quoted name and the columns to write, in the table's order.
func describe(ctx context.Context, q queryer, t Table) (string, []column, error) {
	if t.Name == "" {
		return "", nil, errors.New("eddy: pgsink: no table name")
	}
	if t.Mode != Upsert && t.Mode != Append {
		return "", nil, fmt.Errorf("eddy: pgsink: table %s: unknown mode %v", t.Name, t.Mode)
	}
	if t.Mode == Upsert && len(t.Key) == 0 {
		return "", nil, fmt.Errorf("eddy: pgsink: table %s: upsert needs key columns", t.Name)
	}
	var name *string
	if err := q.QueryRow(ctx, "SELECT to_regclass($1)::text", t.Name).Scan(&name); err != nil {
		return "", nil, fmt.Errorf("eddy: pgsink: table %s: %w", t.Name, err)
	}
	if name == nil {
		return "", nil, fmt.Errorf("eddy: pgsink: table %s does not exist", t.Name)
	}
	rows, err := q.Query(ctx, `SELECT attname, format_type(atttypid, atttypmod), attgenerated <> '', attidentity = 'a'
		FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, *name)
	if err != nil {
		return "", nil, fmt.Errorf("eddy: pgsink: table %s: columns: %w", t.Name, err)
	}
	type info struct {
		typ                string
		generated, identAl bool
	}
	have := map[string]info{}
	var order []string
	for rows.Next() {
		var n string
		var i info
		if err := rows.Scan(&n, &i.typ, &i.generated, &i.identAl); err != nil {
			rows.Close()
			return "", nil, fmt.Errorf("eddy: pgsink: table %s: columns: %w", t.Name, err)
		}
		have[n] = i
		order = append(order, n)
	}
	if err := rows.Err(); err != nil {
		return "", nil, fmt.Errorf("eddy: pgsink: table %s: columns: %w", t.Name, err)
	}
	want := t.Columns
	if len(want) == 0 {
		for _, n := range order {
			if i := have[n]; !i.generated && !i.identAl {
				want = append(want, n)
			}
		}
	}
	var missing []string
	for _, n := range append(slices.Clone(t.Key), want...) {
		if _, ok := have[n]; !ok && !slices.Contains(missing, n) {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return "", nil, fmt.Errorf("eddy: pgsink: table %s has no column %s", *name, quoteList(missing))
	}
	for _, n := range want {
		if i := have[n]; i.generated || i.identAl {
			return "", nil, fmt.Errorf("eddy: pgsink: table %s: column %q cannot be written (generated or identity ALWAYS)", *name, n)
		}
	}
	for _, k := range t.Key {
		if !slices.Contains(want, k) {
			return "", nil, fmt.Errorf("eddy: pgsink: table %s: key column %q is not among the columns written", *name, k)
		}
	}
	if t.Mode == Upsert {
		ok, err := uniqueOn(ctx, q, *name, t.Key)
		if err != nil {
			return "", nil, fmt.Errorf("eddy: pgsink: table %s: indexes: %w", t.Name, err)
		}
		if !ok {
			return "", nil, fmt.Errorf("eddy: pgsink: table %s: upsert needs a primary key or unique index on exactly (%s)", *name, strings.Join(t.Key, ", "))
		}
	}
	var cols []column
	for _, n := range order {
		if slices.Contains(want, n) {
			cols = append(cols, column{name: n, typ: have[n].typ, key: slices.Contains(t.Key, n)})
		}
	}
	return *name, cols, nil
}

// uniqueOn reports whether table has a unique index (or primary key),
// without predicate or expressions, on exactly the columns key: what ON
// CONFLICT (key) needs.
func uniqueOn(ctx context.Context, q queryer, table string, key []string) (bool, error) {
	rows, err := q.Query(ctx, `SELECT ARRAY(SELECT a.attname::text FROM unnest(i.indkey) k JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k)
		FROM pg_index i WHERE i.indrelid = $1::regclass AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL`, table)
	if err != nil {
		return false, err
	}
	want := slices.Sorted(slices.Values(key))
	found := false
	for rows.Next() {
		var cols []string
		if err := rows.Scan(&cols); err != nil {
			rows.Close()
			return false, err
		}
		slices.Sort(cols)
		if slices.Equal(cols, want) {
			found = true
		}
	}
	return found, rows.Err()
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
