package eddy_test

import (
	"fmt"
	"strings"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// Orders keyed by order id name their customer ("<customer>,<amount>");
// customers are keyed by customer id. The join follows each order to its
// customer: an update of a customer updates its orders, and an order that
// moves to another customer stops following the first.
func ExampleJoinTablesOnForeignKey() {
	t := eddy.NewTopology()
	orders := eddy.TableFrom(t, "orders", "orders", serde.String(), serde.String())
	customers := eddy.TableFrom(t, "customers", "customers", serde.String(), serde.String())
	customerOf := func(_ string, order string) string { c, _, _ := strings.Cut(order, ","); return c }
	shipping := eddy.JoinTablesOnForeignKey(orders, customers, "order-customer", customerOf, eddy.LeftJoin,
		func(_ string, order, region string, found bool) string {
			if !found {
				region = "unknown"
			}
			return order + " ships to " + region
		})
	eddy.To(eddy.ToStream(shipping), "shipping", serde.String(), serde.String())

	d, err := eddytest.New(t, eddytest.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	ord := eddytest.Input(d, "orders", serde.String(), serde.String())
	cus := eddytest.Input(d, "customers", serde.String(), serde.String())
	cus.Pipe("ann", "north", 1)
	ord.Pipe("o1", "ann,30", 2)
	ord.Pipe("o2", "bob,12", 3) // bob is not known yet
	cus.Pipe("bob", "south", 4)
	cus.Pipe("ann", "east", 5)
	ord.Pipe("o1", "bob,30", 6) // o1 moves to bob
	cus.Pipe("ann", "west", 7)  // no order of ann's left: no result
	cus.PipeTombstone("bob", 8)
	out, _ := eddytest.Output(d, "shipping", serde.String(), serde.String()).ReadKeyValues()
	for _, kv := range out {
		fmt.Printf("%s: %s\n", kv.Key, kv.Value)
	}
	// Output:
	// o1: ann,30 ships to north
	// o2: bob,12 ships to unknown
	// o2: bob,12 ships to south
	// o1: ann,30 ships to east
	// o1: bob,30 ships to south
	// o1: bob,30 ships to unknown
	// o2: bob,12 ships to unknown
}
