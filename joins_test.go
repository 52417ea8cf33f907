package eddy_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/plan"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// pipe is one record for a join test: topic, key, value (nil value: a
// tombstone), timestamp.
type pipe struct {
	topic, key string
	value      *string
	ts         int64
}

func val(s string) *string { return &s }

func pipeRecords(t *testing.T, d *eddytest.Driver, recs []pipe) {
	t.Helper()
	for _, r := range recs {
		var v []byte
		if r.value != nil {
			v = []byte(*r.value)
		}
		if err := d.PipeRaw(r.topic, []byte(r.key), v, r.ts); err != nil {
			t.Fatal(err)
		}
	}
}

// readStrings renders "key=value", or "key=nil" for a tombstone.
func readStrings(t *testing.T, d *eddytest.Driver, topic string) []string {
	t.Helper()
	recs, err := eddytest.Output(d, topic, serde.String(), serde.String()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		v := r.Value
		if r.Tombstone {
			v = "nil"
		}
		out = append(out, r.Key+"="+v)
	}
	return out
}

func newDriver(t *testing.T, topo *eddy.Topology) *eddytest.Driver {
	t.Helper()
	d, err := eddytest.New(topo, eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func opt(v string, ok bool) string {
	if !ok {
		return "-"
	}
	return v
}

func TestJoinStreamTable(t *testing.T) {
	in := []pipe{
		{"orders", "a", val("o1"), 1},    // no account yet
		{"accounts", "a", val("ann"), 2}, // the table's rows never trigger results
		{"orders", "a", val("o2"), 3},
		{"accounts", "a", val("anna"), 4},
		{"orders", "a", val("o3"), 5},
		{"accounts", "a", nil, 6}, // deleted
		{"orders", "a", val("o4"), 7},
		{"orders", "b", val("o5"), 8},
	}
	cases := []struct {
		kind eddy.JoinKind
		want []string
	}{
		{eddy.InnerJoin, []string{"a=o2/ann", "a=o3/anna"}},
		{eddy.LeftJoin, []string{"a=o1/-", "a=o2/ann", "a=o3/anna", "a=o4/-", "b=o5/-"}},
	}
	for _, tc := range cases {
		t.Run(tc.kind.String(), func(t *testing.T) {
			topo := eddy.NewTopology()
			orders := eddy.Source(topo, "orders", serde.String(), serde.String())
			accounts := eddy.TableFrom(topo, "accounts", "accounts", serde.String(), serde.String())
			joined := eddy.JoinStreamTable(orders, accounts, tc.kind, func(_ string, o, name string, ok bool) string {
				return o + "/" + opt(name, ok)
			})
			eddy.To(joined, "out", serde.String(), serde.String())
			d := newDriver(t, topo)
			pipeRecords(t, d, in)
			if got := readStrings(t, d, "out"); !slices.Equal(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestJoinTables(t *testing.T) {
	in := []pipe{
		{"left", "a", val("l1"), 1},  // no right row
		{"right", "a", val("r1"), 2}, // both
		{"left", "a", val("l2"), 3},  // both, updated
		{"right", "b", val("r2"), 4}, // right only
		{"right", "a", nil, 5},       // a's right row deleted
		{"left", "a", nil, 6},        // a's left row deleted: a has no rows
		{"left", "b", val("l3"), 7},  // b has both
	}
	cases := []struct {
		kind eddy.JoinKind
		want []string
	}{
		{eddy.InnerJoin, []string{"a=l1+r1", "a=l2+r1", "a=nil", "b=l3+r2"}},
		{eddy.LeftJoin, []string{"a=l1+-", "a=l1+r1", "a=l2+r1", "a=l2+-", "a=nil", "b=l3+r2"}},
		{eddy.OuterJoin, []string{"a=l1+-", "a=l1+r1", "a=l2+r1", "b=-+r2", "a=l2+-", "a=nil", "b=l3+r2"}},
	}
	for _, tc := range cases {
		t.Run(tc.kind.String(), func(t *testing.T) {
			topo := eddy.NewTopology()
			l := eddy.TableFrom(topo, "left", "left-rows", serde.String(), serde.String())
			r := eddy.TableFrom(topo, "right", "right-rows", serde.String(), serde.String())
			joined := eddy.JoinTables(l, r, tc.kind, func(_ string, lv string, lok bool, rv string, rok bool) string {
				return opt(lv, lok) + "+" + opt(rv, rok)
			})
			eddy.To(eddy.ToStream(joined), "out", serde.String(), serde.String())
			d := newDriver(t, topo)
			pipeRecords(t, d, in)
			if got := readStrings(t, d, "out"); !slices.Equal(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestJoinStreams(t *testing.T) {
	const s = 1000
	// Window: 5s either way, grace 2s. A left record's window closes once
	// stream time passes ts + 5s + 2s.
	in := []pipe{
		{"clicks", "a", val("c1"), 10 * s},
		{"views", "a", val("v1"), 12 * s},  // joins c1 (2s apart)
		{"views", "a", val("v2"), 16 * s},  // joins c1? 6s apart: no
		{"clicks", "b", val("c2"), 17 * s}, // unmatched so far
		{"clicks", "a", val("c3"), 11 * s}, // out of order: joins v1 (1s), v2 (5s)
		{"views", "c", val("v3"), 20 * s},  // unmatched
		{"views", "b", val("v4"), 21 * s},  // joins c2 (4s)
		// stream time 30s: windows of c1 (10+7 < 30), c3, v1, v2, v3
		// (20+7 < 30) are closed; v2 matched c3; v3 unmatched.
		{"clicks", "z", val("c4"), 30 * s},
		{"views", "a", val("v5"), 2 * s}, // late: 2+5+2 < 30
		// stream time 40s: c4 (30+7 < 40) closes unmatched.
		{"views", "z", val("v6"), 40 * s},
	}
	cases := []struct {
		kind eddy.JoinKind
		want []string
	}{
		{eddy.InnerJoin, []string{"a=c1+v1", "a=c3+v1", "a=c3+v2", "b=c2+v4"}},
		{eddy.LeftJoin, []string{"a=c1+v1", "a=c3+v1", "a=c3+v2", "b=c2+v4", "z=c4+-"}},
		// Outer: v3 (closes at 27s, emitted at stream time 30s) and, at
		// 40s, c4; v6 waits.
		{eddy.OuterJoin, []string{"a=c1+v1", "a=c3+v1", "a=c3+v2", "b=c2+v4", "c=-+v3", "z=c4+-"}},
	}
	for _, tc := range cases {
		t.Run(tc.kind.String(), func(t *testing.T) {
			topo := eddy.NewTopology()
			clicks := eddy.Source(topo, "clicks", serde.String(), serde.String())
			views := eddy.Source(topo, "views", serde.String(), serde.String())
			joined := eddy.JoinStreams(clicks, views, eddy.JoinWindowsOf(5*time.Second).WithGrace(2*time.Second), tc.kind, "clicks-views",
				serde.String(), serde.String(), serde.String(),
				func(_ string, l string, lok bool, r string, rok bool) string { return opt(l, lok) + "+" + opt(r, rok) })
			eddy.To(joined, "out", serde.String(), serde.String())
			d := newDriver(t, topo)
			pipeRecords(t, d, in)
			if got := readStrings(t, d, "out"); !slices.Equal(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
			if n := d.LateRecordsDropped(); n != 1 {
				t.Errorf("LateRecordsDropped = %d, want 1", n)
			}
		})
	}
}

// TestJoinStreamsRepartitions: a stream re-keyed before a join goes
// through a repartition topic automatically.
func TestJoinStreamsRepartitions(t *testing.T) {
	topo := eddy.NewTopology()
	clicks := eddy.Source(topo, "clicks", serde.String(), serde.String())
	// Clicks are keyed by session; their value is the user: re-key.
	byUser := eddy.SelectKey(clicks, func(_, user string) string { return user })
	views := eddy.Source(topo, "views", serde.String(), serde.String())
	joined := eddy.JoinStreams(byUser, views, eddy.JoinWindowsOf(time.Second), eddy.InnerJoin, "cv",
		serde.String(), serde.String(), serde.String(),
		func(k string, l string, _ bool, r string, _ bool) string { return fmt.Sprint(l, "+", r) })
	eddy.To(joined, "out", serde.String(), serde.String())
	rt, err := plan.Build(topo, eddy.Config{AppID: "app"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.Repartitions) != 1 || rt.Repartitions[0].Topic != "app-cv-left-repartition" {
		t.Fatalf("repartitions: %+v", rt.Repartitions)
	}
	d := newDriver(t, topo)
	pipeRecords(t, d, []pipe{{"views", "ann", val("home"), 1000}, {"clicks", "s1", val("ann"), 1500}})
	if got, want := readStrings(t, d, "out"), []string{"ann=ann+home"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestJoinGlobal(t *testing.T) {
	for _, kind := range []eddy.JoinKind{eddy.InnerJoin, eddy.LeftJoin} {
		t.Run(kind.String(), func(t *testing.T) {
			topo := eddy.NewTopology()
			// Orders keyed by order id, value "<currency>:<amount>"; rates
			// keyed by currency, a global table.
			orders := eddy.Source(topo, "orders", serde.String(), serde.String())
			rates := eddy.GlobalTableFrom(topo, "rates", "rates", serde.String(), serde.String())
			joined := eddy.JoinGlobal(orders, rates, func(_, v string) string { return v[:3] }, kind,
				func(_ string, v, rate string, ok bool) string { return v + "@" + opt(rate, ok) })
			eddy.To(joined, "out", serde.String(), serde.String())
			d := newDriver(t, topo)
			pipeRecords(t, d, []pipe{
				{"orders", "o1", val("EUR:5"), 1},
				{"rates", "EUR", val("1.1"), 2},
				{"orders", "o2", val("EUR:7"), 3},
				{"rates", "EUR", nil, 4},
				{"orders", "o3", val("EUR:9"), 5},
			})
			want := map[eddy.JoinKind][]string{
				eddy.InnerJoin: {"o2=EUR:7@1.1"},
				eddy.LeftJoin:  {"o1=EUR:5@-", "o2=EUR:7@1.1", "o3=EUR:9@-"},
			}[kind]
			if got := readStrings(t, d, "out"); !slices.Equal(got, want) {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}
