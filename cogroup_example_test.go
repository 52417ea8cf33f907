package eddy_test

import (
	"fmt"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// Profile is a customer's activity, built from two streams.
type Profile struct {
	Clicks int   `json:"clicks"`
	Spent  int64 `json:"spent"`
}

// One profile per customer from page clicks (a page name) and purchases
// (an amount in cents): two value types, one store and one changelog,
// where two aggregates and a join would need three.
func ExampleCogroup() {
	t := eddy.NewTopology()
	clicks := eddy.GroupByKey(eddy.Source(t, "clicks", serde.String(), serde.String()), serde.String())
	purchases := eddy.GroupByKey(eddy.Source(t, "purchases", serde.String(), serde.Int64()), serde.String())
	cg := eddy.Cogroup(clicks, func(_ string, _ string, p Profile) Profile { p.Clicks++; return p })
	cg = eddy.CogroupWith(cg, purchases, func(_ string, cents int64, p Profile) Profile { p.Spent += cents; return p })
	profiles := eddy.CogroupAggregate(cg, "profiles", func() Profile { return Profile{} }, serde.JSON[Profile]())
	eddy.To(eddy.ToStream(profiles), "profiles", serde.String(), serde.JSON[Profile]())

	d, err := eddytest.New(t, eddytest.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	clk := eddytest.Input(d, "clicks", serde.String(), serde.String())
	pur := eddytest.Input(d, "purchases", serde.String(), serde.Int64())
	clk.Pipe("ann", "home", 1)
	clk.Pipe("ann", "shoes", 2)
	pur.Pipe("ann", 4999, 3)
	pur.Pipe("bob", 1500, 4)
	out, _ := eddytest.Output(d, "profiles", serde.String(), serde.JSON[Profile]()).ReadKeyValues()
	for _, kv := range out {
		fmt.Printf("%s %+v\n", kv.Key, kv.Value)
	}
	// Output:
	// ann {Clicks:1 Spent:0}
	// ann {Clicks:2 Spent:0}
	// ann {Clicks:2 Spent:4999}
	// bob {Clicks:0 Spent:1500}
}
