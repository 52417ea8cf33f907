package eddy_test

import (
	"fmt"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// Count, per product, the orders, the distinct customers, and the
// distinct customers who ordered 10 or more at once: SQL's
//
//	SELECT product, count(*), count(DISTINCT customer),
//	       count(DISTINCT customer) FILTER (WHERE quantity >= 10)
//	FROM orders GROUP BY product
//
// The customer column has two filters, bit 0 (every order) and bit 1
// (large orders); fresh[0] says which of them the order's customer is
// new to.
func ExampleAggregateDistinct() {
	type order struct {
		Customer string
		Quantity int64
	}
	type counts struct{ Orders, Customers, LargeCustomers int64 }
	t := eddy.NewTopology()
	orders := eddy.Source(t, "orders", serde.String(), serde.JSON[order]()) // product -> order
	customers := eddy.Distinct(func(_ string, o order) string { return o.Customer }, serde.String(),
		func(_ string, o order) uint64 {
			if o.Quantity >= 10 {
				return 0b11
			}
			return 0b01
		})
	stats := eddy.AggregateDistinct(eddy.GroupByKey(orders, serde.String()), "product-stats",
		[]eddy.DistinctColumn[string, order]{customers},
		func() counts { return counts{} },
		func(_ string, _ order, fresh []uint64, c counts) counts {
			c.Orders++
			c.Customers += int64(fresh[0] & 1)
			c.LargeCustomers += int64(fresh[0] >> 1 & 1)
			return c
		}, serde.JSON[counts]())
	eddy.To(eddy.ToStream(stats), "product-stats", serde.String(), serde.JSON[counts]())

	d, err := eddytest.New(t, eddytest.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	in := eddytest.Input(d, "orders", serde.String(), serde.JSON[order]())
	in.Pipe("pen", order{"ann", 2}, 1)
	in.Pipe("pen", order{"bob", 1}, 2)
	in.Pipe("pen", order{"ann", 12}, 3)
	in.Pipe("pen", order{"ann", 30}, 4)
	out, _ := eddytest.Output(d, "product-stats", serde.String(), serde.JSON[counts]()).ReadKeyValues()
	for _, kv := range out {
		fmt.Printf("%s: %+v\n", kv.Key, kv.Value)
	}
	// Output:
	// pen: {Orders:1 Customers:1 LargeCustomers:0}
	// pen: {Orders:2 Customers:2 LargeCustomers:0}
	// pen: {Orders:3 Customers:2 LargeCustomers:1}
	// pen: {Orders:4 Customers:2 LargeCustomers:1}
}
