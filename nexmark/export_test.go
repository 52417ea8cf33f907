package nexmark

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

// TestExport writes events in both formats and reads them back: every
// event, in order, each field as the generator made it.
func TestExport(t *testing.T) {
	g := newGen(t, Config{Seed: 4})
	const n = 5_000
	// want[kind] are the rows of kind's events, in index order, as
	// strings.
	want := map[Kind][][]string{}
	for i := range int64(n) {
		e := g.Event(i)
		d := func(v int64) string { return strconv.FormatInt(v, 10) }
		switch e.Kind {
		case KindPerson:
			p := e.Person
			want[KindPerson] = append(want[KindPerson], []string{d(p.ID), p.Name, p.EmailAddress, p.CreditCard, p.City, p.State, FormatTime(p.DateTime), p.Extra})
		case KindAuction:
			a := e.Auction
			want[KindAuction] = append(want[KindAuction], []string{d(a.ID), a.ItemName, a.Description, d(a.InitialBid), d(a.Reserve), FormatTime(a.DateTime), FormatTime(a.Expires), d(a.Seller), d(a.Category), a.Extra})
		case KindBid:
			b := e.Bid
			want[KindBid] = append(want[KindBid], []string{d(b.Auction), d(b.Bidder), d(b.Price), b.Channel, b.URL, FormatTime(b.DateTime), b.Extra})
		}
	}
	dir := t.TempDir()
	for _, format := range []string{"jsonl", "csv"} {
		if err := g.Export(filepath.Join(dir, format), n, format); err != nil {
			t.Fatal(err)
		}
		for kind, rows := range want {
			f, err := os.Open(filepath.Join(dir, format, kind.String()+"."+format))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cols := exportColumns(kind)
			var got [][]string
			if format == "csv" {
				recs, err := csv.NewReader(f).ReadAll()
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(recs[0], cols) {
					t.Fatalf("%s.csv header %v, want %v", kind, recs[0], cols)
				}
				got = recs[1:]
			} else {
				lines := bufio.NewScanner(f)
				lines.Buffer(nil, 1<<20)
				for lines.Scan() {
					var obj map[string]any
					if err := json.Unmarshal(lines.Bytes(), &obj); err != nil {
						t.Fatal(err)
					}
					var row []string
					for _, c := range cols {
						switch v := obj[c].(type) {
						case string:
							row = append(row, v)
						case float64:
							row = append(row, strconv.FormatFloat(v, 'f', -1, 64))
						default:
							t.Fatalf("%s: column %s is %T", kind, c, v)
						}
					}
					got = append(got, row)
				}
			}
			if !reflect.DeepEqual(got, rows) {
				t.Fatalf("%s.%s: %d rows read back differ from the %d events (first: %v, want %v)", kind, format, len(got), len(rows), got[0], rows[0])
			}
		}
	}
	if err := g.Export(dir, 1, "parquet"); !errors.Is(err, ErrExportFormat) {
		t.Errorf("format parquet: %v, want ErrExportFormat", err)
	}
}
