package queries

import (
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

// TestResultsDecode decodes every output record of every query into rows:
// each row has a value per column, of the types Result documents, and a
// damaged record is an error, not a row.
func TestResultsDecode(t *testing.T) {
	g, err := nexmark.New(testConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range All() {
		t.Run(q.Name, func(t *testing.T) {
			r := q.Result
			if len(r.Columns) == 0 || r.Rows == nil {
				t.Fatalf("no Result: columns %v", r.Columns)
			}
			outs := run(t, q, g, 10_000)
			rows := 0
			for _, o := range outs {
				if o.value == nil && r.Upsert {
					continue // a tombstone deletes the key's rows
				}
				err := r.Rows(o.key, o.value, func(values ...any) {
					rows++
					if len(values) != len(r.Columns) {
						t.Fatalf("a row of %d values, want %d (%v)", len(values), len(r.Columns), r.Columns)
					}
					for i, v := range values {
						switch v.(type) {
						case int64, float64, string, nil:
						default:
							t.Fatalf("column %s: a %T", r.Columns[i], v)
						}
					}
				})
				if err != nil {
					t.Fatalf("record %x=%x: %v", o.key, o.value, err)
				}
			}
			if rows == 0 && len(outs) > 0 {
				t.Fatalf("%d records gave no row", len(outs))
			}
			if len(outs) > 0 {
				o := outs[0]
				if err := r.Rows(o.key, o.value[:1], func(...any) {}); err == nil && len(o.value) > 1 {
					t.Errorf("the first byte of record %x=%x decoded", o.key, o.value)
				}
			}
			t.Logf("%d records, %d rows", len(outs), rows)
		})
	}
}

func TestResultValues(t *testing.T) {
	if got := Timestamp(nexmark.DefaultBaseTime + 1500); got != "2026-01-01 00:00:01.500" {
		t.Errorf("Timestamp = %q", got)
	}
	id := windowCountResult(true).Identity
	a, _ := WindowCountSerde{}.Serialize(nil, WindowCount{Count: 1, Start: 0, End: 10})
	b, _ := WindowCountSerde{}.Serialize(nil, WindowCount{Count: 2, Start: 10, End: 20})
	c, _ := WindowCountSerde{}.Serialize(nil, WindowCount{Count: 3, Start: 10, End: 20})
	key := int64Key(nil, 7)
	if string(id(nil, key, a)) == string(id(nil, key, b)) || string(id(nil, key, b)) != string(id(nil, key, c)) {
		t.Error("q12's identity: two windows of a bidder must differ, two counts of one window must not")
	}
}
