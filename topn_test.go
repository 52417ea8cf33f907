package eddy_test

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// score is a test row: cmp ranks by Points alone, so rows with the same
// points tie and rank by their encodings.
type score struct {
	Points int64
	Name   string
}

// scoreSerde encodes Points (8 bytes, big-endian) then Name: ties rank
// by name.
type scoreSerde struct{}

func (scoreSerde) Serialize(dst []byte, s score) ([]byte, error) {
	return append(binary.BigEndian.AppendUint64(dst, uint64(s.Points)), s.Name...), nil
}

func (scoreSerde) Deserialize(b []byte) (score, error) {
	if len(b) < 8 {
		return score{}, fmt.Errorf("score of %d bytes", len(b))
	}
	return score{Points: int64(binary.BigEndian.Uint64(b)), Name: string(b[8:])}, nil
}

// byPointsDesc ranks the most points first.
func byPointsDesc(a, b score) int { return cmp.Compare(b.Points, a.Points) }

// firstN is the reference: the n first of rows by points, descending,
// ties by name (what scoreSerde's encodings give), computed by sorting.
func firstN(rows []score, n int) []score {
	s := slices.Clone(rows)
	slices.SortFunc(s, func(a, b score) int {
		if c := byPointsDesc(a, b); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return s[:min(n, len(s))]
}

// applyUpdates applies the updates written to topic since the last read
// to last: a value replaces its key's, a tombstone deletes the key.
func applyUpdates(t *testing.T, d *eddytest.Driver, topic string, last map[string][]score) {
	t.Helper()
	recs, err := eddytest.Output(d, topic, serde.String(), serde.List(scoreSerde{})).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Tombstone {
			delete(last, r.Key)
		} else {
			last[r.Key] = r.Value
		}
	}
}

func TestTopN(t *testing.T) {
	topo := eddy.NewTopology()
	g := eddy.GroupByKey(eddy.Source(topo, "scores", serde.String(), scoreSerde{}), serde.String())
	eddy.To(eddy.ToStream(eddy.TopN(g, "top", 3, byPointsDesc, scoreSerde{})), "tops", serde.String(), serde.List(scoreSerde{}))
	d, err := eddytest.New(topo, eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := eddytest.Input(d, "scores", serde.String(), scoreSerde{})
	out := eddytest.Output(d, "tops", serde.String(), serde.List(scoreSerde{}))

	// By hand: a value enters, a tie ranks by encoding, a value that
	// does not enter a full list changes nothing.
	steps := []struct {
		s    score
		want []score // nil: no update
	}{
		{score{5, "e"}, []score{{5, "e"}}},
		{score{7, "g"}, []score{{7, "g"}, {5, "e"}}},
		{score{5, "a"}, []score{{7, "g"}, {5, "a"}, {5, "e"}}},
		{score{1, "z"}, nil},
		{score{5, "f"}, nil}, // ties with the last, ranks after it by name
		{score{6, "b"}, []score{{7, "g"}, {6, "b"}, {5, "a"}}},
		{score{9, "x"}, []score{{9, "x"}, {7, "g"}, {6, "b"}}},
	}
	for i, st := range steps {
		if err := in.Pipe("p", st.s, int64(i)); err != nil {
			t.Fatal(err)
		}
		recs, err := out.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case st.want == nil && len(recs) != 0:
			t.Errorf("step %d (%v): %v, want no update", i, st.s, recs)
		case st.want != nil && (len(recs) != 1 || !slices.Equal(recs[0].Value, st.want) || recs[0].Timestamp != int64(i)):
			t.Errorf("step %d (%v): %v, want one update %v at %d", i, st.s, recs, st.want, i)
		}
	}

	// Random rows over a few keys, with a restart midway: each key's last
	// update is its n first.
	rng := rand.New(rand.NewPCG(1, 2))
	rows := map[string][]score{"p": {{5, "e"}, {7, "g"}, {5, "a"}, {1, "z"}, {5, "f"}, {6, "b"}, {9, "x"}}}
	for i := range 2000 {
		if i == 1000 {
			if err := d.Restart(); err != nil {
				t.Fatal(err)
			}
		}
		k := fmt.Sprintf("k%d", rng.IntN(7))
		s := score{Points: rng.Int64N(40), Name: fmt.Sprintf("n%d", rng.IntN(30))}
		rows[k] = append(rows[k], s)
		if err := in.Pipe(k, s, int64(100+i)); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string][]score{}
	applyUpdates(t, d, "tops", got)
	for k, rs := range rows {
		if k == "p" {
			continue // its updates were read above
		}
		if want := firstN(rs, 3); !slices.Equal(got[k], want) {
			t.Errorf("key %s: %v, want %v", k, got[k], want)
		}
	}
	store, err := eddytest.KeyValueStore(d, eddy.NewKeyValueStoreSpec("top", serde.String(), serde.List(scoreSerde{})))
	if err != nil {
		t.Fatal(err)
	}
	for k, rs := range rows {
		if v, ok, err := store.Get(k); err != nil || !ok || !slices.Equal(v, firstN(rs, 3)) {
			t.Errorf("store, key %s: %v, %v, %v; want %v", k, v, ok, err, firstN(rs, 3))
		}
	}
}

// teamTops keeps the n first players of each team (TopNTable, store
// "team-top") from the table "players" (player → "team:points"), and
// writes the lists to "team-tops".
func teamTops(n int) *eddy.Topology {
	topo := eddy.NewTopology()
	players := eddy.TableFrom(topo, "players", "players", serde.String(), serde.String())
	byTeam := eddy.GroupTableBy(players, func(player, row string) (string, score) {
		team, points, _ := strings.Cut(row, ":")
		var p int64
		fmt.Sscan(points, &p)
		return team, score{Points: p, Name: player}
	}, "by-team", serde.String(), scoreSerde{})
	eddy.To(eddy.ToStream(eddy.TopNTable(byTeam, "team-top", n, byPointsDesc, scoreSerde{})), "team-tops", serde.String(), serde.List(scoreSerde{}))
	return topo
}

// TestTopNTable keeps the two first players of each team from a table of
// players (player → team and points) whose rows change team, change
// points and go: after every update, each team's last result is the two
// first of its current players, and a team with none has none.
func TestTopNTable(t *testing.T) {
	d, err := eddytest.New(teamTops(2), eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := eddytest.Input(d, "players", serde.String(), serde.String())

	type row struct {
		team   string
		points int64
	}
	current := map[string]row{}
	rng := rand.New(rand.NewPCG(3, 4))
	teams := []string{"red", "blue", "green"}
	got := map[string][]score{} // the last update of each team
	rowsRanked := 0             // updates of a row in its team's two first: what makes a refill
	for i := range 3000 {
		if i == 1500 {
			if err := d.Restart(); err != nil {
				t.Fatal(err)
			}
		}
		player := fmt.Sprintf("p%02d", rng.IntN(40))
		if old, ok := current[player]; ok {
			var team []score
			for p, r := range current {
				if r.team == old.team {
					team = append(team, score{r.points, p})
				}
			}
			if slices.Contains(firstN(team, 2), score{old.points, player}) && len(team) > 2 {
				rowsRanked++
			}
		}
		if rng.IntN(5) == 0 {
			delete(current, player)
			if err := in.PipeTombstone(player, int64(i)); err != nil {
				t.Fatal(err)
			}
		} else {
			r := row{team: teams[rng.IntN(len(teams))], points: rng.Int64N(20)}
			current[player] = r
			if err := in.Pipe(player, fmt.Sprintf("%s:%d", r.team, r.points), int64(i)); err != nil {
				t.Fatal(err)
			}
		}
		if i%100 != 99 && i != 2999 {
			continue
		}
		want := map[string][]score{}
		for p, r := range current {
			want[r.team] = append(want[r.team], score{r.points, p})
		}
		applyUpdates(t, d, "team-tops", got)
		for _, team := range teams {
			if w := firstN(want[team], 2); !slices.Equal(got[team], w) {
				t.Fatalf("after update %d, team %s: %v, want %v (players %v)", i, team, got[team], w, want[team])
			}
		}
	}
	if rowsRanked < 100 {
		t.Errorf("only %d updates took a row out of its team's first two while others waited: the test does not exercise the refill", rowsRanked)
	}
	t.Logf("%d updates took a row out of its team's first two while others waited", rowsRanked)
}

func TestTopNRefusesBadArguments(t *testing.T) {
	for name, build := range map[string]func(g eddy.GroupedStream[string, score]){
		"n 0":      func(g eddy.GroupedStream[string, score]) { eddy.TopN(g, "top", 0, byPointsDesc, scoreSerde{}) },
		"no cmp":   func(g eddy.GroupedStream[string, score]) { eddy.TopN(g, "top", 1, nil, scoreSerde{}) },
		"no serde": func(g eddy.GroupedStream[string, score]) { eddy.TopN[string, score](g, "top", 1, byPointsDesc, nil) },
	} {
		topo := eddy.NewTopology()
		build(eddy.GroupByKey(eddy.Source(topo, "scores", serde.String(), scoreSerde{}), serde.String()))
		_, err := eddytest.New(topo, eddytest.Options{})
		if err == nil || !strings.Contains(err.Error(), "TopN") || !strings.Contains(err.Error(), "top") {
			t.Errorf("%s: %v, want an error naming TopN and its store", name, err)
		}
	}
	// TopNTable's errors name TopNTable, the call to fix.
	topo := eddy.NewTopology()
	players := eddy.TableFrom(topo, "players", "players", serde.String(), scoreSerde{})
	byTeam := eddy.GroupTableBy(players, func(_ string, s score) (string, score) { return "team", s }, "by-team", serde.String(), scoreSerde{})
	eddy.TopNTable(byTeam, "team-top", 0, byPointsDesc, scoreSerde{})
	if err := topo.Err(); err == nil || !strings.Contains(err.Error(), "TopNTable after") {
		t.Errorf("TopNTable with n 0: %v, want an error naming TopNTable", err)
	}
}

// TestTopNTableDuplicatesCacheAborts: rows that encode alike (several
// players with the same points and no name) count as one row each, with
// the table cache on and transactions that abort: each team's last
// update is the two first of its current rows.
func TestTopNTableDuplicatesCacheAborts(t *testing.T) {
	topo := eddy.NewTopology()
	players := eddy.TableFrom(topo, "players", "players", serde.String(), serde.String())
	byTeam := eddy.GroupTableBy(players, func(player, row string) (string, score) {
		team, points, _ := strings.Cut(row, ":")
		var p int64
		fmt.Sscan(points, &p)
		return team, score{Points: p}
	}, "by-team", serde.String(), scoreSerde{})
	eddy.To(eddy.ToStream(eddy.TopNTable(byTeam, "team-top", 2, byPointsDesc, scoreSerde{})), "team-tops", serde.String(), serde.List(scoreSerde{}))
	d, err := eddytest.New(topo, eddytest.Options{Config: eddy.Config{TableCacheBytes: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := eddytest.Input(d, "players", serde.String(), serde.String())
	rng := rand.New(rand.NewPCG(5, 6))
	teams := []string{"red", "blue"}
	current := map[string]string{}
	got := map[string][]score{}
	abort := errors.New("abort")
	for i := range 600 {
		next := maps.Clone(current)
		err := d.Transaction(func() error {
			for range 1 + rng.IntN(4) {
				player := fmt.Sprintf("p%d", rng.IntN(12))
				if rng.IntN(4) == 0 {
					delete(next, player)
					if err := in.PipeTombstone(player, int64(i)); err != nil {
						return err
					}
					continue
				}
				row := fmt.Sprintf("%s:%d", teams[rng.IntN(2)], rng.IntN(4))
				next[player] = row
				if err := in.Pipe(player, row, int64(i)); err != nil {
					return err
				}
			}
			if rng.IntN(5) == 0 {
				return abort
			}
			return nil
		})
		if err != nil && !errors.Is(err, abort) {
			t.Fatal(err)
		}
		if err == nil {
			current = next
		}
		applyUpdates(t, d, "team-tops", got)
		want := map[string][]score{}
		for _, row := range current {
			team, points, _ := strings.Cut(row, ":")
			var p int64
			fmt.Sscan(points, &p)
			want[team] = append(want[team], score{Points: p})
		}
		for _, team := range teams {
			if w := firstN(want[team], 2); !slices.Equal(got[team], w) {
				t.Fatalf("after transaction %d, team %s: %v, want %v (rows %v)", i, team, got[team], w, want[team])
			}
		}
	}
}
