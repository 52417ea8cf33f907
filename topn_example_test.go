package eddy_test

import (
	"cmp"
	"fmt"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// The two highest bids of each auction: bids keyed by auction, their
// prices as values. A bid that does not beat the second highest changes
// nothing, so it gives no update.
func ExampleTopN() {
	t := eddy.NewTopology()
	bids := eddy.Source(t, "bids", serde.String(), serde.Int64()) // auction → price
	top := eddy.TopN(eddy.GroupByKey(bids, serde.String()), "top-bids", 2,
		func(a, b int64) int { return cmp.Compare(b, a) }, serde.Int64()) // highest first
	eddy.To(eddy.ToStream(top), "top-bids", serde.String(), serde.List(serde.Int64()))

	d, err := eddytest.New(t, eddytest.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	in := eddytest.Input(d, "bids", serde.String(), serde.Int64())
	for i, price := range []int64{10, 30, 20, 5, 40} {
		in.Pipe("lamp", price, int64(i))
	}
	out, _ := eddytest.Output(d, "top-bids", serde.String(), serde.List(serde.Int64())).ReadKeyValues()
	for _, kv := range out {
		fmt.Println(kv.Key, kv.Value)
	}
	// Output:
	// lamp [10]
	// lamp [30 10]
	// lamp [30 20]
	// lamp [40 30]
}

// The best player of each team, from a table of players (name → team
// and points) whose rows change: when the best one leaves the team, the
// next best takes the place; a team left with no player is deleted.
func ExampleTopNTable() {
	type player struct {
		Name, Team string
		Points     int64
	}
	t := eddy.NewTopology()
	players := eddy.TableFrom(t, "players", "players", serde.String(), serde.JSON[player]())
	byTeam := eddy.GroupTableBy(players, func(_ string, p player) (string, player) { return p.Team, p },
		"players-by-team", serde.String(), serde.JSON[player]())
	best := eddy.TopNTable(byTeam, "best-player", 1,
		func(a, b player) int { return cmp.Compare(b.Points, a.Points) }, serde.JSON[player]())
	eddy.To(eddy.ToStream(best), "best-players", serde.String(), serde.List(serde.JSON[player]()))

	d, err := eddytest.New(t, eddytest.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	in := eddytest.Input(d, "players", serde.String(), serde.JSON[player]())
	in.Pipe("ann", player{"ann", "red", 7}, 1)
	in.Pipe("bob", player{"bob", "red", 5}, 2)
	in.Pipe("ann", player{"ann", "blue", 7}, 3) // ann moves: bob is red's best
	in.PipeTombstone("ann", 4)                  // blue has no player left
	out, _ := eddytest.Output(d, "best-players", serde.String(), serde.List(serde.JSON[player]())).ReadAll()
	for _, r := range out {
		if r.Tombstone {
			fmt.Println(r.Key, "deleted")
			continue
		}
		fmt.Println(r.Key, r.Value[0].Name, r.Value[0].Points)
	}
	// Output:
	// red ann 7
	// red bob 5
	// blue ann 7
	// blue deleted
}
