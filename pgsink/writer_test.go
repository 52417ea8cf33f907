package pgsink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eddy-streams/eddy/internal/testutil/pgtest"
)

func connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func exec(t testing.TB, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// dump is a table's rows as "col=val,…" lines in key order, for comparing.
func dump(t testing.TB, conn *pgx.Conn, table, orderBy string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), fmt.Sprintf("SELECT * FROM %s ORDER BY %s", table, orderBy), pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		// The simple protocol returns text: each value as psql prints it.
		vals := rows.RawValues()
		var parts []string
		for i, f := range rows.FieldDescriptions() {
			v := "<nil>"
			if vals[i] != nil {
				v = string(vals[i])
			}
			parts = append(parts, fmt.Sprintf("%s=%s", f.Name, v))
		}
		out = append(out, strings.Join(parts, ","))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func write(t testing.TB, conn *pgx.Conn, w *Writer, rows []Row) error {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, tx, rows); err != nil {
		tx.Rollback(ctx)
		return err
	}
	return tx.Commit(ctx)
}

// writeEach writes rows with WriteEach in a transaction it commits, and
// returns the rows' errors.
func writeEach(t testing.TB, conn *pgx.Conn, w *Writer, rows []Row) []error {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	errs, err := w.WriteEach(ctx, tx, rows)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return errs
}

func jsonRows(t testing.TB, m Mapper, kv ...string) []Row {
	t.Helper()
	var rows []Row
	for i := 0; i < len(kv); i += 2 {
		var v []byte
		if kv[i+1] != "<tombstone>" {
			v = []byte(kv[i+1])
		}
		r, err := m([]byte(kv[i]), v)
		if err != nil {
			t.Fatalf("map %s: %v", kv[i+1], err)
		}
		rows = append(rows, r)
	}
	return rows
}

var methods = []struct {
	name string
	m    method
}{{"unnest", viaUnnest}, {"copy", viaCopy}, {"byvalue", viaUnnestByValue}}

// TestWriterUpsert: upserts insert then update by key; the same key twice
// in a batch keeps the last; a tombstone deletes; a tombstone after an
// upsert of its key in the same batch wins, and the reverse; a batch of
// tombstones only deletes.
func TestWriterUpsert(t *testing.T) {
	c := pgtest.Start(t)
	conn := connect(t, c.DSN())
	for _, m := range methods {
		t.Run(m.name, func(t *testing.T) {
			table := "bal_" + m.name
			exec(t, conn, fmt.Sprintf(`CREATE TABLE %s (account text PRIMARY KEY, balance bigint NOT NULL, note text, meta jsonb, ok boolean)`, table))
			w, err := NewWriter(context.Background(), conn, Table{Name: table, Key: []string{"account"}})
			if err != nil {
				t.Fatal(err)
			}
			w.method = m.m
			mp := JSONMapper("account")
			if err := write(t, conn, w, jsonRows(t, mp,
				"a", `{"balance": 1, "note": "x", "meta": {"k": [1, 2]}, "ok": true}`,
				"b", `{"balance": 2}`,
				"a", `{"balance": 3, "note": null}`,
				"c", `{"balance": 4}`,
				"c", `<tombstone>`,
				"d", `<tombstone>`,
				"d", `{"balance": 5, "ok": false}`,
			)); err != nil {
				t.Fatal(err)
			}
			got := dump(t, conn, table, "account")
			want := []string{
				"account=a,balance=3,note=<nil>,meta=<nil>,ok=<nil>",
				"account=b,balance=2,note=<nil>,meta=<nil>,ok=<nil>",
				"account=d,balance=5,note=<nil>,meta=<nil>,ok=f",
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after batch 1:\n got %q\nwant %q", got, want)
			}
			if err := write(t, conn, w, jsonRows(t, mp,
				"b", `<tombstone>`,
				"a", `{"balance": 10, "note": "y", "meta": {"k": "v"}, "ok": true}`,
			)); err != nil {
				t.Fatal(err)
			}
			got = dump(t, conn, table, "account")
			want = []string{
				"account=a,balance=10,note=y,meta={\"k\": \"v\"},ok=t",
				"account=d,balance=5,note=<nil>,meta=<nil>,ok=f",
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after batch 2:\n got %q\nwant %q", got, want)
			}
			// Tombstones only, one of a key with no row.
			if err := write(t, conn, w, jsonRows(t, mp, "d", `<tombstone>`, "zz", `<tombstone>`, "d", `<tombstone>`)); err != nil {
				t.Fatal(err)
			}
			got = dump(t, conn, table, "account")
			want = want[:1]
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after batch 3:\n got %q\nwant %q", got, want)
			}
		})
	}
}

// TestWriterUpsertKeysEqualAsValues: keys equal as values but written
// differently (a uuid in two cases, numeric 1 and 1.0, one instant in two
// zones) are one key: within a batch the last row wins, an upsert or a
// tombstone, as for keys written alike, and the batch is not refused.
func TestWriterUpsertKeysEqualAsValues(t *testing.T) {
	c := pgtest.Start(t)
	conn := connect(t, c.DSN())
	const upper, lower = "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
	for _, m := range methods {
		t.Run(m.name, func(t *testing.T) {
			for _, tc := range []struct {
				name, typ string
				batches   [][]string // key, value pairs: each a batch
				want      []string
			}{
				{"uuid", "uuid", [][]string{{upper, `{"v": "first"}`, "b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", `{"v": "other"}`, lower, `{"v": "last"}`}},
					[]string{"k=" + lower + ",v=last", "k=b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,v=other"}},
				{"numeric", "numeric", [][]string{{"1", `{"v": "one"}`, "2", `{"v": "two"}`, "1.0", `{"v": "one again"}`}},
					[]string{"k=1.0,v=one again", "k=2,v=two"}},
				{"timestamptz", "timestamptz", [][]string{{"2026-12-04T10:00:00Z", `{"v": "utc"}`, "2026-12-04T11:00:00+01:00", `{"v": "paris"}`}},
					[]string{"k=2026-12-04 10:00:00+00,v=paris"}},
				// An upsert then a tombstone of the same uuid written
				// differently deletes it, in the batch and over a row
				// written before; a tombstone then an upsert keeps it.
				{"upsert-then-delete", "uuid", [][]string{
					{"c0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", `{"v": "kept"}`, lower, `{"v": "before"}`},
					{upper, `{"v": "gone"}`, lower, "<tombstone>", "C0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "<tombstone>", "c0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", `{"v": "back"}`}},
					[]string{"k=c0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,v=back"}},
			} {
				table := fmt.Sprintf("eq_%s_%s", strings.ReplaceAll(tc.name, "-", "_"), m.name)
				exec(t, conn, fmt.Sprintf(`CREATE TABLE %s (k %s PRIMARY KEY, v text)`, table, tc.typ))
				w, err := NewWriter(context.Background(), conn, Table{Name: table, Key: []string{"k"}})
				if err != nil {
					t.Fatal(err)
				}
				w.method = m.m
				for i, b := range tc.batches {
					if err := write(t, conn, w, jsonRows(t, JSONMapper("k"), b...)); err != nil {
						t.Errorf("%s: batch %d: %v", tc.name, i, err)
					}
				}
				exec(t, conn, "SET TIME ZONE 'UTC'")
				if got := dump(t, conn, table, "k"); fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
				}
			}
		})
	}
}

// TestWriterKeysEqualAsValuesWithBadRow: a batch that holds one key twice
// (as values) and a bad row fails as the bad row's fault, not as the
// pair's, and WriteEach then blames only the bad row.
func TestWriterKeysEqualAsValuesWithBadRow(t *testing.T) {
	c := pgtest.Start(t)
	conn := connect(t, c.DSN())
	ctx := context.Background()
	exec(t, conn, `CREATE TABLE ub (k uuid PRIMARY KEY, n int CHECK (n >= 0))`)
	w, err := NewWriter(ctx, conn, Table{Name: "ub", Key: []string{"k"}})
	if err != nil {
		t.Fatal(err)
	}
	rows := jsonRows(t, JSONMapper("k"),
		"A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", `{"n": 1}`,
		"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", `{"n": 2}`,
		"b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", `{"n": -1}`,
	)
	if err := write(t, conn, w, rows); !IsRowError(err) || !strings.Contains(err.Error(), "check constraint") {
		t.Fatalf("Write = %v, want the check constraint's row error", err)
	}
	errs := writeEach(t, conn, w, rows)
	if errs[0] != nil || errs[1] != nil || errs[2] == nil {
		t.Errorf("row errors %v, want only the last row's", errs)
	}
	if got := dump(t, conn, "ub", "k"); fmt.Sprint(got) != "[k=a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,n=2]" {
		t.Errorf("table = %q", got)
	}
}

// TestIsRowError: a row's faults are row errors; a cardinality violation
// (what is left of it after the Writer's de-duplication comes from the
// schema) and the database's failures are not, and only the latter are
// retried.
func TestIsRowError(t *testing.T) {
	for _, tc := range []struct {
		err            error
		row, retryable bool
	}{
		{&RowError{Row: 1, Err: errors.New("no column")}, true, false},
		{fmt.Errorf("eddy: pgsink: write to t: %w", &pgconn.PgError{Code: "23505"}), true, false},
		{&pgconn.PgError{Code: "22P02"}, true, false},
		{&pgconn.PgError{Code: "P0001"}, true, false},
		{&pgconn.PgError{Code: "21000"}, false, false},
		{&pgconn.PgError{Code: "42P01"}, false, false},
		{&pgconn.PgError{Code: "57P01"}, false, true},
		{&pgconn.PgError{Code: "40001"}, false, true},
		{errors.New("connection refused"), false, true},
	} {
		if got := IsRowError(tc.err); got != tc.row {
			t.Errorf("IsRowError(%v) = %v, want %v", tc.err, got, tc.row)
		}
		if got := retryable(tc.err); got != tc.retryable {
			t.Errorf("retryable(%v) = %v, want %v", tc.err, got, tc.retryable)
		}
	}
}

// TestWriterAppend: append keeps every row, duplicates of a key included,
// keeps a column's default when Columns leaves it out, and refuses a
// tombstone.
func TestWriterAppend(t *testing.T) {
	c := pgtest.Start(t)
	conn := connect(t, c.DSN())
	for _, m := range methods {
		t.Run(m.name, func(t *testing.T) {
			table := "log_" + m.name
			exec(t, conn, fmt.Sprintf(`CREATE TABLE %s (id bigserial PRIMARY KEY, account text, amount numeric(12,2))`, table))
			w, err := NewWriter(context.Background(), conn, Table{Name: table, Key: []string{"account"}, Mode: Append, Columns: []string{"account", "amount"}})
			if err != nil {
				t.Fatal(err)
			}
			w.method = m.m
			mp := JSONMapper("account")
			if err := write(t, conn, w, jsonRows(t, mp, "a", `{"amount": 1.5}`, "a", `{"amount": 2}`, "b", `{"amount": -3.25}`)); err != nil {
				t.Fatal(err)
			}
			got := dump(t, conn, table, "id")
			want := []string{"id=1,account=a,amount=1.50", "id=2,account=a,amount=2.00", "id=3,account=b,amount=-3.25"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("got %q\nwant %q", got, want)
			}
			err = write(t, conn, w, jsonRows(t, mp, "a", `{"amount": 1}`, "a", "<tombstone>"))
			if !IsRowError(err) || !strings.Contains(err.Error(), "row 1") || !strings.Contains(err.Error(), "tombstone") {
				t.Fatalf("tombstone in append mode: %v", err)
			}
		})
	}
}

// TestWriterValidation: the table and every named column must exist (the
// error names them), upsert needs a unique key on its key columns.
func TestWriterValidation(t *testing.T) {
	c := pgtest.Start(t)
	conn := connect(t, c.DSN())
	exec(t, conn, `CREATE TABLE v (account text PRIMARY KEY, balance bigint, g bigint GENERATED ALWAYS AS (balance * 2) STORED)`)
	exec(t, conn, `CREATE TABLE nokey (account text, balance bigint)`)
	exec(t, conn, `CREATE SCHEMA s`)
	exec(t, conn, `CREATE TABLE s."Mixed" (k int, v int, UNIQUE (k))`)
	ctx := context.Background()
	for _, tc := range []struct {
		table Table
		err   string
	}{
		{Table{Name: "nope", Key: []string{"k"}}, "table nope does not exist"},
		{Table{Name: "v", Key: []string{"acount"}}, `table v has no column "acount"`},
		{Table{Name: "v", Key: []string{"account"}, Columns: []string{"account", "balance", "amount", "when"}}, `table v has no column "amount", "when"`},
		{Table{Name: "v", Key: []string{"account"}, Columns: []string{"account", "g"}}, `column "g" cannot be written`},
		{Table{Name: "v", Key: []string{"account"}, Columns: []string{"balance"}}, `key column "account" is not among the columns written`},
		{Table{Name: "v"}, "upsert needs key columns"},
		{Table{Name: "nokey", Key: []string{"account"}}, "upsert needs a primary key or unique index on exactly (account)"},
		{Table{Name: "v", Key: []string{"balance"}}, "unique index on exactly (balance)"},
	} {
		_, err := NewWriter(ctx, conn, tc.table)
		if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "eddy: ") {
			t.Errorf("%+v: error %v, want one containing %q", tc.table, err, tc.err)
		}
	}
	for _, ok := range []Table{
		{Name: "v", Key: []string{"account"}},
		{Name: "nokey", Mode: Append},
		{Name: `s."Mixed"`, Key: []string{"k"}},
	} {
		w, err := NewWriter(ctx, conn, ok)
		if err != nil {
			t.Errorf("%+v: %v", ok, err)
			continue
		}
		if ok.Name == "v" && fmt.Sprint(w.Columns()) != "[account balance]" {
			t.Errorf("v's columns = %v, want the generated one left out", w.Columns())
		}
	}
}

// TestWriterRowErrors: a field with no column, a value its column's type
// does not read and a constraint violation are row errors; WriteEach
// writes the good rows of the batch and names each bad one's reason.
func TestWriterRowErrors(t *testing.T) {
	c := pgtest.Start(t)
	conn := connect(t, c.DSN())
	exec(t, conn, `CREATE TABLE r (account text PRIMARY KEY, balance bigint NOT NULL CHECK (balance >= 0))`)
	ctx := context.Background()
	w, err := NewWriter(ctx, conn, Table{Name: "r", Key: []string{"account"}})
	if err != nil {
		t.Fatal(err)
	}
	mp := JSONMapper("account")
	rows := jsonRows(t, mp,
		"a", `{"balance": 1}`,
		"b", `{"balance": 2, "colour": "red"}`,
		"c", `{"balance": "lots"}`,
		"d", `{"balance": -1}`,
		"e", `{"balance": null}`,
		"f", `{"balance": 6}`,
	)
	err = write(t, conn, w, rows)
	if !IsRowError(err) {
		t.Fatalf("Write of a batch with bad rows: %v, want a row error", err)
	}
	errs := writeEach(t, conn, w, rows)
	wantErr := []string{"", `no column "colour"`, "invalid input syntax for type bigint", "violates check constraint", "violates not-null constraint", ""}
	for i, e := range errs {
		if (e == nil) != (wantErr[i] == "") || e != nil && !strings.Contains(e.Error(), wantErr[i]) {
			t.Errorf("row %d: error %v, want %q", i, e, wantErr[i])
		}
	}
	got := dump(t, conn, "r", "account")
	if fmt.Sprint(got) != "[account=a,balance=1 account=f,balance=6]" {
		t.Fatalf("rows = %q", got)
	}
	// Mapping errors are the record's too.
	for _, v := range []string{`[1]`, `{"balance":`, `null`} {
		if _, err := mp([]byte("k"), []byte(v)); err == nil {
			t.Errorf("JSONMapper(%s): no error", v)
		}
	}
	if _, err := mp([]byte("k"), []byte(`{"account": "other"}`)); err == nil || !strings.Contains(err.Error(), "differs from the record key") {
		t.Errorf("a key field differing from the record key: %v", err)
	}
}

// TestWriteEachScattered: WriteEach's bisection blames exactly the bad
// rows of a large batch, wherever they are (first, last, side by side,
// either side of a split), and writes all the others.
func TestWriteEachScattered(t *testing.T) {
	c := pgtest.Start(t)
	conn := connect(t, c.DSN())
	exec(t, conn, `CREATE TABLE s (account text PRIMARY KEY, balance bigint NOT NULL CHECK (balance >= 0))`)
	ctx := context.Background()
	w, err := NewWriter(ctx, conn, Table{Name: "s", Key: []string{"account"}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	bad := map[int]bool{0: true, 1: true, 2: true, 333: true, 499: true, 500: true, 998: true, 999: true}
	rows := make([]Row, n)
	for i := range rows {
		balance := int64(i)
		if bad[i] {
			balance = -1
		}
		rows[i] = Row{Values: map[string]any{"account": fmt.Sprint("a", i), "balance": balance}}
	}
	errs := writeEach(t, conn, w, rows)
	for i, e := range errs {
		if (e != nil) != bad[i] {
			t.Errorf("row %d: error %v, want one: %v", i, e, bad[i])
		}
	}
	var written int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM s`).Scan(&written); err != nil || written != n-len(bad) {
		t.Errorf("%d rows written (%v), want %d", written, err, n-len(bad))
	}
}

// TestTextOf: Go values as the text their column reads.
func TestTextOf(t *testing.T) {
	type cents int64
	for _, tc := range []struct {
		v    any
		want string
	}{
		{"s", "s"}, {int64(-5), "-5"}, {cents(7), "7"}, {uint8(200), "200"}, {3.25, "3.25"},
		{1e21, "1000000000000000000000"}, {true, "true"}, {[]byte{1, 0xab}, `\x01ab`},
		{time.Date(2026, 12, 4, 1, 2, 3, 5, time.UTC), "2026-12-04T01:02:03.000000005Z"},
		{map[string]int{"a": 1}, `{"a":1}`}, {[]string{"x"}, `["x"]`},
	} {
		got, err := textOf(tc.v)
		if err != nil || got == nil || *got != tc.want {
			t.Errorf("textOf(%#v) = %v, %v; want %q", tc.v, got, err, tc.want)
		}
	}
	var p *int
	if got, err := textOf(p); got != nil || err != nil {
		t.Errorf("textOf(nil pointer) = %v, %v", got, err)
	}
	if _, err := textOf(func() {}); err == nil {
		t.Error("textOf(func): no error")
	}
}
