package eddy_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// regularTopology joins "left" and "right" (string keys and values) with
// JoinStreamsRegular, writing "l+r" to "out".
func regularTopology(o eddy.RegularJoin) *eddy.Topology {
	topo := eddy.NewTopology()
	l := eddy.Source(topo, "left", serde.String(), serde.String())
	r := eddy.Source(topo, "right", serde.String(), serde.String())
	joined := eddy.JoinStreamsRegular(l, r, o, "lr", serde.String(), serde.String(), serde.String(),
		func(_ string, l, r string) string { return l + "+" + r })
	eddy.To(joined, "out", serde.String(), serde.String())
	return topo
}

// readStamped renders "key=value@timestamp".
func readStamped(t *testing.T, d *eddytest.Driver, topic string) []string {
	t.Helper()
	recs, err := eddytest.Output(d, topic, serde.String(), serde.String()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%s=%s@%d", r.Key, r.Value, r.Timestamp))
	}
	return out
}

// storeLen counts the entries of a join's store.
func storeLen(t *testing.T, d *eddytest.Driver, store string) int {
	t.Helper()
	kv, err := eddytest.KeyValueStore(d, eddy.NewKeyValueStoreSpec(store, serde.Bytes(), serde.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, err := range kv.All() {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// TestJoinStreamsRegular: every pair of a key joins once, whichever side
// comes first and however far apart in time; equal records each join.
func TestJoinStreamsRegular(t *testing.T) {
	const h = 3600 * 1000 // an hour: no window would hold these
	d := newDriver(t, regularTopology(eddy.RegularJoin{}))
	pipeRecords(t, d, []pipe{
		{"left", "a", val("l1"), 1},
		{"right", "a", val("r1"), 5 * h},  // a=l1+r1@5h
		{"right", "b", val("r2"), 6 * h},  // no left b yet
		{"left", "b", val("l2"), 2},       // b=l2+r2@6h (out of order in time)
		{"left", "a", val("l3"), 7 * h},   // a=l3+r1@7h
		{"right", "a", val("r1"), 5 * h},  // a duplicate of r1: a=l1+r1@5h, a=l3+r1@7h
		{"left", "a", val("l1"), 1},       // a duplicate of l1: meets r1 twice
		{"left", "c", val("l4"), 8 * h},   // no partner
		{"right", "a", val("r5"), 9 * h},  // meets l1 twice, l3 once, in time order
		{"right", "b", val("r6"), 10 * h}, // b=l2+r6
	})
	want := []string{
		"a=l1+r1@18000000",
		"b=l2+r2@21600000",
		"a=l3+r1@25200000",
		"a=l1+r1@18000000", "a=l3+r1@25200000",
		"a=l1+r1@18000000", "a=l1+r1@18000000",
		"a=l1+r5@32400000", "a=l1+r5@32400000", "a=l3+r5@32400000",
		"b=l2+r6@36000000",
	}
	if got := readStamped(t, d, "out"); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	// Stored: l1 (twice, one entry), l3, l2, l4; r1 (twice), r2, r5, r6.
	if l, r := storeLen(t, d, "lr-left"), storeLen(t, d, "lr-right"); l != 4 || r != 4 {
		t.Errorf("stores hold %d left and %d right entries, want 4 and 4", l, r)
	}
}

// TestJoinStreamsRegularUnique: with the left side declared unique, a
// right record is kept only until its left partner arrives, and the
// results are those of the join without the declaration.
func TestJoinStreamsRegularUnique(t *testing.T) {
	in := []pipe{
		{"right", "a", val("r1"), 10}, // waits for a
		{"right", "a", val("r1"), 10}, // a duplicate waits too
		{"right", "a", val("r2"), 5},
		{"right", "b", val("r3"), 11}, // waits for b, which never comes
		{"left", "a", val("l1"), 20},  // meets r2, r1, r1; they leave
		{"right", "a", val("r4"), 30}, // meets l1 at once, not stored
		{"left", "c", val("l2"), 40},
		{"right", "c", val("r5"), 1}, // meets l2, not stored
	}
	want := []string{"a=l1+r2@20", "a=l1+r1@20", "a=l1+r1@20", "a=l1+r4@30", "c=l2+r5@40"}
	for _, tc := range []struct {
		name        string
		o           eddy.RegularJoin
		left, right int // entries stored at the end
	}{
		{"none", eddy.RegularJoin{}, 2, 5},
		{"left unique", eddy.RegularJoin{}.LeftUnique(), 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, regularTopology(tc.o))
			pipeRecords(t, d, in)
			if got := readStamped(t, d, "out"); !slices.Equal(got, want) {
				t.Errorf("got  %q\nwant %q", got, want)
			}
			if l, r := storeLen(t, d, "lr-left"), storeLen(t, d, "lr-right"); l != tc.left || r != tc.right {
				t.Errorf("stores hold %d left and %d right entries, want %d and %d", l, r, tc.left, tc.right)
			}
		})
	}
}

// TestJoinStreamsRegularBothUnique: a one-to-one join keeps only the
// records still waiting for their partner.
func TestJoinStreamsRegularBothUnique(t *testing.T) {
	d := newDriver(t, regularTopology(eddy.RegularJoin{}.LeftUnique().RightUnique()))
	pipeRecords(t, d, []pipe{
		{"left", "a", val("l1"), 1},
		{"right", "b", val("r1"), 2},
		{"right", "a", val("r2"), 3}, // a done: l1 leaves
		{"left", "b", val("l2"), 4},  // b done: r1 leaves
		{"left", "c", val("l3"), 5},  // waits
	})
	if got, want := readStamped(t, d, "out"), []string{"a=l1+r2@3", "b=l2+r1@4"}; !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if l, r := storeLen(t, d, "lr-left"), storeLen(t, d, "lr-right"); l != 1 || r != 0 {
		t.Errorf("stores hold %d left and %d right entries, want 1 and 0", l, r)
	}
}

// TestJoinStreamsRegularUniqueViolated: a second record of a key on a side
// declared unique fails, and its effects are rolled back.
func TestJoinStreamsRegularUniqueViolated(t *testing.T) {
	d := newDriver(t, regularTopology(eddy.RegularJoin{}.LeftUnique()))
	pipeRecords(t, d, []pipe{{"left", "a", val("l1"), 1}, {"right", "b", val("r1"), 2}})
	err := d.PipeRaw("left", []byte("a"), []byte("l2"), 3)
	if err == nil || !strings.Contains(err.Error(), "LeftUnique") {
		t.Fatalf("a second left record of a: %v, want an error naming LeftUnique", err)
	}
	pipeRecords(t, d, []pipe{{"right", "a", val("r2"), 4}})
	if got, want := readStamped(t, d, "out"), []string{"a=l1+r2@4"}; !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestJoinStreamsRegularTTL: a stored record joins while stream time is
// within the TTL of its timestamp, and the sweep deletes it after.
func TestJoinStreamsRegularTTL(t *testing.T) {
	const s = 1000
	d := newDriver(t, regularTopology(eddy.RegularJoin{}.WithTTL(10*time.Second)))
	pipeRecords(t, d, []pipe{
		{"left", "a", val("l1"), 0},
		{"right", "a", val("r1"), 10 * s}, // stream time 10s: l1 is 10s old, joins
		{"left", "b", val("l2"), 11 * s},  // stream time 11s: l1 expired
		{"right", "a", val("r2"), 11 * s}, // l1 expired: no result
		{"left", "a", val("l3"), 0},       // older than the TTL: joins r1, r2, not stored
		{"right", "a", val("r3"), 12 * s},
	})
	want := []string{"a=l1+r1@10000", "a=l3+r1@10000", "a=l3+r2@11000"}
	if got := readStamped(t, d, "out"); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	// Stream time 12s crossed 10s (the sweep every 5s) when it was 10s:
	// nothing was expired then. At 26s, the sweep deletes all but l4.
	pipeRecords(t, d, []pipe{{"left", "x", val("l4"), 26 * s}})
	if l, r := storeLen(t, d, "lr-left"), storeLen(t, d, "lr-right"); l != 1 || r != 0 {
		t.Errorf("after the sweep the stores hold %d left and %d right entries, want 1 and 0", l, r)
	}
}

// TestJoinStreamsRegularBadTTL: a TTL below a millisecond is a topology
// error.
func TestJoinStreamsRegularBadTTL(t *testing.T) {
	topo := regularTopology(eddy.RegularJoin{}.WithTTL(0))
	if err := topo.Err(); err == nil || !strings.Contains(err.Error(), "TTL") {
		t.Fatalf("Err() = %v, want the TTL named", err)
	}
}

// TestJoinStreamsRegularRestart: the stores carry over a restart, so
// pairs whose first record came before it still join, once.
func TestJoinStreamsRegularRestart(t *testing.T) {
	for _, o := range []eddy.RegularJoin{{}, eddy.RegularJoin{}.LeftUnique()} {
		d := newDriver(t, regularTopology(o))
		pipeRecords(t, d, []pipe{{"left", "a", val("l1"), 1}, {"right", "b", val("r1"), 2}})
		if err := d.Restart(); err != nil {
			t.Fatal(err)
		}
		pipeRecords(t, d, []pipe{{"right", "a", val("r2"), 3}, {"left", "b", val("l2"), 4}})
		if got, want := readStamped(t, d, "out"), []string{"a=l1+r2@3", "b=l2+r1@4"}; !slices.Equal(got, want) {
			t.Errorf("got  %q\nwant %q", got, want)
		}
	}
}

// TestJoinStreamsRegularRepartitions: a re-keyed input goes through a
// repartition topic first.
func TestJoinStreamsRegularRepartitions(t *testing.T) {
	topo := eddy.NewTopology()
	clicks := eddy.Source(topo, "clicks", serde.String(), serde.String())
	byUser := eddy.SelectKey(clicks, func(_, user string) string { return user })
	users := eddy.Source(topo, "users", serde.String(), serde.String())
	joined := eddy.JoinStreamsRegular(byUser, users, eddy.RegularJoin{}.RightUnique(), "cu",
		serde.String(), serde.String(), serde.String(), func(_ string, click, name string) string { return click + "+" + name })
	eddy.To(joined, "out", serde.String(), serde.String())
	d := newDriver(t, topo)
	pipeRecords(t, d, []pipe{{"clicks", "s1", val("ann"), 1}, {"users", "ann", val("Ann"), 2}, {"clicks", "s2", val("ann"), 3}})
	if got, want := readStrings(t, d, "out"), []string{"ann=ann+Ann", "ann=ann+Ann"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// uniqueCase is a regular join's unique declarations, as options and
// as what the test's inputs must respect.
type uniqueCase struct {
	name                    string
	o                       eddy.RegularJoin
	leftUnique, rightUnique bool
}

// uniqueCases are the four combinations of unique sides.
func uniqueCases() []uniqueCase {
	return []uniqueCase{
		{"none", eddy.RegularJoin{}, false, false},
		{"left unique", eddy.RegularJoin{}.LeftUnique(), true, false},
		{"right unique", eddy.RegularJoin{}.RightUnique(), false, true},
		{"both unique", eddy.RegularJoin{}.LeftUnique().RightUnique(), true, true},
	}
}

// TestJoinStreamsRegularRandom compares the join with every pair of equal
// keys, over random inputs and arrival orders, with and without the
// unique declarations (whose sides then get one record per key).
func TestJoinStreamsRegularRandom(t *testing.T) {
	for _, tc := range uniqueCases() {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			for round := range 20 {
				ls, rs := randomSide(rng, "left", tc.leftUnique, 8, 4, 3, 100), randomSide(rng, "right", tc.rightUnique, 8, 4, 3, 100)
				want := allPairs(ls, rs)
				in := append(ls, rs...)
				rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
				d := newDriver(t, regularTopology(tc.o))
				pipeRecords(t, d, in)
				got := readStamped(t, d, "out")
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Fatalf("round %d: got  %q\nwant %q", round, got, want)
				}
			}
		})
	}
}

// randomSide makes random records of topic for keys "k", "kk", ... (each a
// prefix of the next): up to perKey-1 per key (one if unique), with values
// of values kinds and timestamps below maxTS, so that some repeat.
func randomSide(rng *rand.Rand, topic string, unique bool, keys, perKey, values int, maxTS int64) []pipe {
	var ps []pipe
	for k := range keys {
		n := rng.IntN(perKey)
		if unique {
			n = min(n, 1)
		}
		for range n {
			v := fmt.Sprintf("%s%d", topic[:1], rng.IntN(values))
			ps = append(ps, pipe{topic, strings.Repeat("k", k+1), &v, rng.Int64N(maxTS)})
		}
	}
	return ps
}

// allPairs is a regular join's results of left records ls and right
// records rs: one per pair of a key, "key=l+r@time".
func allPairs(ls, rs []pipe) []string {
	var out []string
	for _, l := range ls {
		for _, r := range rs {
			if l.key == r.key {
				out = append(out, fmt.Sprintf("%s=%s+%s@%d", l.key, *l.value, *r.value, max(l.ts, r.ts)))
			}
		}
	}
	return out
}

// TestJoinStreamsRegularTTLRandom compares the join under a TTL, with and
// without unique sides, with a reference: a record joins each earlier
// record of the other side of its key that was stored (not older than
// the TTL when it arrived) and is still live (not older than the TTL at
// stream time now), whatever the sweeps deleted meanwhile.
func TestJoinStreamsRegularTTLRandom(t *testing.T) {
	const ttl = 20
	for _, tc := range uniqueCases() {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 8))
			for round := range 30 {
				var in []pipe
				used := map[string]bool{} // unique sides: one record per key, ever
				for range 60 {
					topic := []string{"left", "right"}[rng.IntN(2)]
					key := strings.Repeat("k", 1+rng.IntN(5))
					if unique := topic == "left" && tc.leftUnique || topic == "right" && tc.rightUnique; unique {
						if used[topic+key] {
							continue
						}
						used[topic+key] = true
					}
					v := fmt.Sprintf("%s%d", topic[:1], rng.IntN(3))
					in = append(in, pipe{topic, key, &v, rng.Int64N(100)})
				}
				var want []string
				now := int64(-1 << 62)
				type kept struct {
					pipe
					stored bool
				}
				var seen []kept
				for _, p := range in {
					now = max(now, p.ts)
					for _, s := range seen {
						if s.stored && s.topic != p.topic && s.key == p.key && s.ts >= now-ttl {
							l, r := s.pipe, p
							if p.topic == "left" {
								l, r = p, s.pipe
							}
							want = append(want, fmt.Sprintf("%s=%s+%s@%d", p.key, *l.value, *r.value, max(l.ts, r.ts)))
						}
					}
					seen = append(seen, kept{p, p.ts >= now-ttl})
				}
				d := newDriver(t, regularTopology(tc.o.WithTTL(ttl*time.Millisecond)))
				pipeRecords(t, d, in)
				got := readStamped(t, d, "out")
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Fatalf("round %d: got  %q\nwant %q", round, got, want)
				}
			}
		})
	}
}

// TestJoinStreamsRegularTransactions is TestJoinStreamsRegularRandom with
// records piped in transactions of several, and restarts between them, so
// that a record stored and then taken by its unique partner in the same
// transaction, or in a later one, leaves the stores as it should: the
// results are every pair once, and the stores, reopened on what was
// committed, hold exactly the records still waiting for a partner (a
// delete the commit left out would bring one back).
func TestJoinStreamsRegularTransactions(t *testing.T) {
	for _, tc := range uniqueCases() {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			for round := range 20 {
				type entry struct {
					key, value string
					ts         int64
				}
				// Few values and times: many equal records, one entry.
				ls, rs := randomSide(rng, "left", tc.leftUnique, 6, 5, 2, 4), randomSide(rng, "right", tc.rightUnique, 6, 5, 2, 4)
				want := allPairs(ls, rs)
				// What waits at the end: a side's records of a key the other
				// side (declared unique) never sent; equal records are one
				// entry, a unique side's record one.
				waiting := func(own, other []pipe, otherUnique bool) int {
					entries := map[entry]bool{}
					for _, p := range own {
						if otherUnique && slices.ContainsFunc(other, func(o pipe) bool { return o.key == p.key }) {
							continue
						}
						entries[entry{p.key, *p.value, p.ts}] = true
					}
					return len(entries)
				}
				wantLeft, wantRight := waiting(ls, rs, tc.rightUnique), waiting(rs, ls, tc.leftUnique)
				in := append(ls, rs...)
				rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
				d := newDriver(t, regularTopology(tc.o))
				for len(in) > 0 {
					n := min(len(in), 1+rng.IntN(8))
					if err := d.Transaction(func() error { pipeRecords(t, d, in[:n]); return nil }); err != nil {
						t.Fatal(err)
					}
					in = in[n:]
					if rng.IntN(3) == 0 {
						if err := d.Restart(); err != nil {
							t.Fatal(err)
						}
					}
				}
				got := readStamped(t, d, "out")
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Fatalf("round %d: got  %q\nwant %q", round, got, want)
				}
				if err := d.Restart(); err != nil {
					t.Fatal(err)
				}
				if l, r := storeLen(t, d, "lr-left"), storeLen(t, d, "lr-right"); l != wantLeft || r != wantRight {
					t.Fatalf("round %d: after a restart the stores hold %d left and %d right entries, want %d and %d", round, l, r, wantLeft, wantRight)
				}
			}
		})
	}
}
