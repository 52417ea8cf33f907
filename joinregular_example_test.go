package eddy_test

import (
	"fmt"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// Auctions keyed by their seller join the sellers, keyed by id, however
// far apart in time they come and whichever comes first. A person is
// created once (RightUnique), so an auction is stored only until its
// seller arrives.
func ExampleJoinStreamsRegular() {
	t := eddy.NewTopology()
	auctions := eddy.Source(t, "auctions-by-seller", serde.String(), serde.String())
	persons := eddy.Source(t, "persons", serde.String(), serde.String())
	offers := eddy.JoinStreamsRegular(auctions, persons, eddy.RegularJoin{}.RightUnique(), "auction-seller",
		serde.String(), serde.String(), serde.String(),
		func(_ string, item, name string) string { return name + " sells " + item })
	eddy.To(offers, "offers", serde.String(), serde.String())

	d, err := eddytest.New(t, eddytest.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	a := eddytest.Input(d, "auctions-by-seller", serde.String(), serde.String())
	p := eddytest.Input(d, "persons", serde.String(), serde.String())
	a.Pipe("p2", "a bike", 1_000)    // its seller is not known yet
	p.Pipe("p1", "Ann", 2_000)       // no auction of Ann's yet
	p.Pipe("p2", "Bob", 3_000)       // meets the bike
	a.Pipe("p1", "a lamp", 900_000)  // a quarter of an hour later
	a.Pipe("p2", "a chair", 901_000) // Bob again
	out, _ := eddytest.Output(d, "offers", serde.String(), serde.String()).ReadKeyValues()
	for _, kv := range out {
		fmt.Printf("%s: %s\n", kv.Key, kv.Value)
	}
	// Output:
	// p2: Bob sells a bike
	// p1: Ann sells a lamp
	// p2: Bob sells a chair
}
