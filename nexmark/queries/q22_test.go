package queries

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

func TestQ22(t *testing.T) {
	eachRate(t, func(t *testing.T, cfg nexmark.Config, g *nexmark.Generator) {
		const n = 30_000
		recs := driveQuery(t, q22(), g, n, nexmark.Topics{Bids: "bid"}, nil)
		requireChecked(t, func() Check { return q22().NewCheck(g, n) }, recs)
	})
}

func TestSplitIndex(t *testing.T) {
	null := sql.NullString{}
	str := func(s string) sql.NullString { return sql.NullString{String: s, Valid: true} }
	for _, c := range []struct {
		s    string
		i    int
		want sql.NullString
	}{
		{"https://www.nexmark.com/abc/def/ghi/item.htm?query=1", 3, str("abc")},
		{"https://www.nexmark.com/abc/def/ghi/item.htm?query=1", 5, str("ghi")},
		{"https://www.nexmark.com/abc/def/ghi/item.htm?query=1", 6, str("item.htm?query=1")},
		{"https://www.nexmark.com/abc/def/ghi/item.htm?query=1", 7, null},
		{"https://www.nexmark.com/abc/def/ghi/item.htm?query=1", 1, str("")},
		{"https://www.nexmark.com/abc/def/ghi/item.htm?query=1", -1, null},
		{"a//b/", 1, str("")}, {"a//b/", 3, str("")}, {"a//b/", 4, null},
		{"/", 0, str("")}, {"/", 1, str("")}, {"/", 2, null},
		{"abc", 0, str("abc")}, {"abc", 1, null},
		{"", 0, null}, // Flink: an empty string has no pieces
	} {
		if got := splitIndex(c.s, '/', c.i); got != c.want {
			t.Errorf("splitIndex(%q, '/', %d) = %+v, want %+v", c.s, c.i, got, c.want)
		}
		if c.s != "" && c.i >= 0 {
			pieces := strings.Split(c.s, "/")
			if want := c.i < len(pieces); want != c.want.Valid || (want && pieces[c.i] != c.want.String) {
				t.Errorf("the case %q, %d disagrees with strings.Split: %q", c.s, c.i, pieces)
			}
		}
	}
}

func TestQ22Result(t *testing.T) {
	in := Q22Row{Auction: 1001, Bidder: 2002, Price: 3003, Channel: "Google",
		Dir1: sql.NullString{String: "abc", Valid: true}, Dir2: sql.NullString{String: "", Valid: true}}
	b, _ := Q22RowSerde{}.Serialize(nil, in)
	if out, err := (Q22RowSerde{}).Deserialize(b); err != nil || out != in {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	for k := range len(b) {
		if _, err := (Q22RowSerde{}).Deserialize(b[:k]); err == nil {
			t.Errorf("%d of %d bytes decoded", k, len(b))
		}
	}
	if _, err := (Q22RowSerde{}).Deserialize(append(b[:len(b)-1:len(b)-1], 9)); err == nil {
		t.Error("a directory longer than the record decoded")
	}
	requireRows(t, resultRows(t, q22(), nil, b), []any{int64(1001), int64(2002), int64(3003), "Google", "abc", "", nil})
}
