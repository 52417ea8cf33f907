package eddy_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// visit is a test record: who visited and what they spent.
type visit struct {
	user, item string
	spent      int64
}

// visitSerde encodes a visit as "user|item|spent".
type visitSerde struct{}

func (visitSerde) Serialize(dst []byte, v visit) ([]byte, error) {
	return fmt.Appendf(dst, "%s|%s|%d", v.user, v.item, v.spent), nil
}

func (visitSerde) Deserialize(b []byte) (visit, error) {
	var v visit
	parts := slices.Collect(func(yield func(string) bool) {
		start := 0
		for i := 0; i <= len(b); i++ {
			if i == len(b) || b[i] == '|' {
				if !yield(string(b[start:i])) {
					return
				}
				start = i + 1
			}
		}
	})
	if len(parts) != 3 {
		return v, errors.New("visit: want user|item|spent")
	}
	_, err := fmt.Sscan(parts[2], &v.spent)
	v.user, v.item = parts[0], parts[1]
	return v, err
}

// distinctCounts is the aggregate of the tests: visits, distinct users,
// distinct users who spent 100 or more, distinct items.
type distinctCounts struct{ visits, users, bigUsers, items int64 }

func (c distinctCounts) String() string {
	return fmt.Sprintf("%d/%d/%d/%d", c.visits, c.users, c.bigUsers, c.items)
}

type distinctCountsSerde struct{}

func (distinctCountsSerde) Serialize(dst []byte, c distinctCounts) ([]byte, error) {
	return fmt.Appendf(dst, "%d %d %d %d", c.visits, c.users, c.bigUsers, c.items), nil
}

func (distinctCountsSerde) Deserialize(b []byte) (distinctCounts, error) {
	var c distinctCounts
	_, err := fmt.Sscan(string(b), &c.visits, &c.users, &c.bigUsers, &c.items)
	return c, err
}

// newDistinctDriver counts, per page, the visits, the distinct users (bit
// 0 of the users column), the distinct users with a visit of spent ≥ 100
// (its bit 1), and the distinct items (a column without filters, which
// ignores an empty item as SQL ignores NULL).
func newDistinctDriver(t *testing.T) (*eddytest.Driver, *eddytest.InputTopic[string, visit], *eddytest.OutputTopic[string, distinctCounts]) {
	t.Helper()
	topo := eddy.NewTopology()
	visits := eddy.Source(topo, "visits", serde.String(), visitSerde{})
	users := eddy.Distinct(func(_ string, v visit) string { return v.user }, serde.String(), func(_ string, v visit) uint64 {
		if v.spent >= 100 {
			return 0b11
		}
		return 0b01
	})
	items := eddy.Distinct(func(_ string, v visit) string { return v.item }, serde.String(), func(_ string, v visit) uint64 {
		if v.item == "" {
			return 0
		}
		return 1
	})
	counts := eddy.AggregateDistinct(eddy.GroupByKey(visits, serde.String()), "page-counts",
		[]eddy.DistinctColumn[string, visit]{users, items},
		func() distinctCounts { return distinctCounts{} },
		func(_ string, _ visit, fresh []uint64, c distinctCounts) distinctCounts {
			c.visits++
			c.users += int64(fresh[0] & 1)
			c.bigUsers += int64(fresh[0] >> 1 & 1)
			c.items += int64(fresh[1] & 1)
			return c
		}, distinctCountsSerde{})
	eddy.To(eddy.ToStream(counts), "page-counts", serde.String(), distinctCountsSerde{})
	d, err := eddytest.New(topo, eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, eddytest.Input(d, "visits", serde.String(), visitSerde{}), eddytest.Output(d, "page-counts", serde.String(), distinctCountsSerde{})
}

// requireCounts reads the updates and requires them to be want, as
// "page=visits/users/bigUsers/items".
func requireCounts(t *testing.T, out *eddytest.OutputTopic[string, distinctCounts], want ...string) {
	t.Helper()
	kvs, err := out.ReadKeyValues()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range kvs {
		got = append(got, kv.Key+"="+kv.Value.String())
	}
	if !slices.Equal(got, want) {
		t.Errorf("updates %q, want %q", got, want)
	}
}

func TestAggregateDistinct(t *testing.T) {
	_, in, out := newDistinctDriver(t)
	for i, v := range []struct {
		page string
		visit
	}{
		{"home", visit{"ann", "pen", 5}},
		{"home", visit{"ann", "pen", 500}}, // ann passes the second filter now
		{"home", visit{"bob", "", 500}},    // no item: the items column ignores it
		{"home", visit{"ann", "ink", 1}},
		{"cart", visit{"ann", "pen", 1}}, // another page: all new
		{"home", visit{"bob", "pen", 100}},
	} {
		if err := in.Pipe(v.page, v.visit, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	requireCounts(t, out, "home=1/1/0/1", "home=2/1/1/1", "home=3/2/2/1", "home=4/2/2/2", "cart=1/1/0/1", "home=5/2/2/2")
}

// TestAggregateDistinctKeyBoundaries: a (key, value) pair is not taken for
// another whose bytes concatenate the same way, nor a value of one column
// for the same bytes in another.
func TestAggregateDistinctKeyBoundaries(t *testing.T) {
	_, in, out := newDistinctDriver(t)
	for i, v := range []struct {
		page string
		visit
	}{
		{"a", visit{"\x00b", "x", 1}},
		{"a\x00", visit{"b", "x", 1}}, // "a"+"\x00b" = "a\x00"+"b", either side of the column's byte 0
		{"a\x00", visit{"y", "b", 1}}, // item "b", the same bytes as user "b"
	} {
		if err := in.Pipe(v.page, v.visit, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	requireCounts(t, out, "a=1/1/0/1", "a\x00=1/1/0/1", "a\x00=2/2/0/2")
}

// TestAggregateDistinctExactlyOnce: an aborted transaction's values are
// not seen (the distinct store's writes are rolled back with the
// aggregate's), and after a restart the committed ones still are.
func TestAggregateDistinctExactlyOnce(t *testing.T) {
	d, in, out := newDistinctDriver(t)
	if err := in.Pipe("home", visit{"ann", "pen", 5}, 1); err != nil {
		t.Fatal(err)
	}
	failed := errors.New("the transaction fails")
	err := d.Transaction(func() error {
		if err := in.Pipe("home", visit{"bob", "ink", 500}, 2); err != nil {
			return err
		}
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("transaction: %v, want it to fail", err)
	}
	if err := d.Restart(); err != nil {
		t.Fatal(err)
	}
	for i, v := range []visit{{"bob", "ink", 500}, {"ann", "pen", 5}} {
		if err := in.Pipe("home", v, int64(3+i)); err != nil {
			t.Fatal(err)
		}
	}
	requireCounts(t, out, "home=1/1/0/1", "home=2/2/1/2", "home=3/2/1/2")
}

// TestAggregateDistinctColumns: no column is refused when the topology is
// built.
func TestAggregateDistinctColumns(t *testing.T) {
	topo := eddy.NewTopology()
	s := eddy.Source(topo, "in", serde.String(), serde.String())
	eddy.AggregateDistinct(eddy.GroupByKey(s, serde.String()), "none", nil,
		func() int64 { return 0 }, func(_, _ string, _ []uint64, n int64) int64 { return n }, serde.Int64())
	if err := topo.Err(); err == nil {
		t.Error("AggregateDistinct with no columns was accepted")
	} else {
		t.Log(err)
	}
}

// TestAggregateDistinctNilColumnFuncs: a column declared without its
// value, serde or filters is a topology error naming the column, not a
// panic at the first record.
func TestAggregateDistinctNilColumnFuncs(t *testing.T) {
	user := func(_ string, v visit) string { return v.user }
	all := func(string, visit) uint64 { return 1 }
	for name, col := range map[string]eddy.DistinctColumn[string, visit]{
		"no filters": eddy.Distinct(user, serde.String(), nil),
		"no value":   eddy.Distinct[string, visit, string](nil, serde.String(), all),
		"no serde":   eddy.Distinct(user, nil, all),
	} {
		topo := eddy.NewTopology()
		s := eddy.Source(topo, "visits", serde.String(), visitSerde{})
		eddy.AggregateDistinct(eddy.GroupByKey(s, serde.String()), "counts",
			[]eddy.DistinctColumn[string, visit]{eddy.Distinct(user, serde.String(), all), col},
			func() int64 { return 0 }, func(_ string, _ visit, fresh []uint64, n int64) int64 { return n + int64(fresh[1]) }, serde.Int64())
		if err := topo.Err(); err == nil || !strings.Contains(err.Error(), "column 1") {
			t.Errorf("%s: Err() = %v, want an error naming column 1", name, err)
		}
	}
}

// TestAggregateDistinctSkippedRecord: a record that fails — a column's
// value does not encode, or the adder panics — and that the error
// policy skips leaves none of its values seen: the next record with the
// same values counts them.
func TestAggregateDistinctSkippedRecord(t *testing.T) {
	topo := eddy.NewTopology()
	s := eddy.Source(topo, "visits", serde.String(), visitSerde{})
	all := func(string, visit) uint64 { return 1 }
	counts := eddy.AggregateDistinct(eddy.GroupByKey(s, serde.String()), "counts",
		[]eddy.DistinctColumn[string, visit]{
			eddy.Distinct(func(_ string, v visit) string { return v.user }, serde.String(), all),
			eddy.Distinct(func(_ string, v visit) string { return v.item }, serde.StrictString(), all),
		},
		func() int64 { return 0 }, func(_ string, v visit, fresh []uint64, n int64) int64 {
			if v.spent < 0 {
				panic("a negative spend")
			}
			return n + int64(fresh[0])
		}, serde.Int64())
	eddy.To(eddy.ToStream(counts), "users", serde.String(), serde.Int64())
	d, err := eddytest.New(topo, eddytest.Options{Config: eddy.Config{OnProcessError: eddy.LogAndContinue}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := eddytest.Input(d, "visits", serde.String(), visitSerde{})
	for i, v := range []visit{
		{"ann", "\xff", 1}, // the item is not UTF-8: skipped
		{"bob", "pen", -1}, // the adder panics: skipped
		{"ann", "pen", 1},
		{"bob", "pen", 1},
	} {
		if err := in.Pipe("home", v, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	kvs, err := eddytest.Output(d, "users", serde.String(), serde.Int64()).ReadKeyValues()
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, kv := range kvs {
		got = append(got, kv.Value)
	}
	if want := []int64{1, 2}; !slices.Equal(got, want) {
		t.Errorf("distinct users after each counted visit: %v, want %v", got, want)
	}
}
