package nexmark_test

import (
	"fmt"

	"github.com/eddy-streams/eddy/nexmark"
)

// The stream is addressed by index: event i is the same on every call and
// in every process with the same Config, which is what makes it replayable.
// Three in four auctions go to the hot seller (1000 here); the others pick
// among the active people or up to ten not yet created, as the reference
// model does, so seller 1007 appears before its Person event.
func ExampleGenerator_Event() {
	g, err := nexmark.New(nexmark.Config{Seed: 42})
	if err != nil {
		panic(err)
	}
	for _, i := range []int64{0, 1, 2, 3, 50, 51} {
		e := g.Event(i)
		switch e.Kind {
		case nexmark.KindPerson:
			fmt.Println(i, "person", e.Person.ID)
		case nexmark.KindAuction:
			fmt.Println(i, "auction", e.Auction.ID, "by", e.Auction.Seller)
		}
	}
	fmt.Println(nexmark.KindOf(4), nexmark.KindOf(49))
	// Output:
	// 0 person 1000
	// 1 auction 1000 by 1000
	// 2 auction 1001 by 1007
	// 3 auction 1002 by 1000
	// 50 person 1001
	// 51 auction 1003 by 1000
	// bid bid
}
