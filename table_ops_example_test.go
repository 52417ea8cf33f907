package eddy_test

import (
	"fmt"
	"strings"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// Join orders with active accounts only: an account that becomes inactive
// leaves the filtered table (its update is forwarded as a delete), so its
// next orders find no account. Without Materialize the filtered table is a
// view: the join applies the predicate to the accounts store's rows.
func ExampleFilterTable() {
	t := eddy.NewTopology()
	accounts := eddy.TableFrom(t, "accounts", "accounts", serde.String(), serde.String()) // id -> status
	active := eddy.FilterTable(accounts, func(_, status string) bool { return status == "active" })
	orders := eddy.Source(t, "orders", serde.String(), serde.String()) // account id -> order
	eddy.To(eddy.JoinStreamTable(orders, active, eddy.LeftJoin, func(_, order, status string, found bool) string {
		if !found {
			return order + ": no active account"
		}
		return order + ": accepted"
	}), "checked-orders", serde.String(), serde.String())

	d, err := eddytest.New(t, eddytest.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	acc := eddytest.Input(d, "accounts", serde.String(), serde.String())
	ord := eddytest.Input(d, "orders", serde.String(), serde.String())
	acc.Pipe("a1", "active", 1)
	ord.Pipe("a1", "o1", 2)
	acc.Pipe("a1", "suspended", 3)
	ord.Pipe("a1", "o2", 4)
	out, _ := eddytest.Output(d, "checked-orders", serde.String(), serde.String()).ReadKeyValues()
	for _, kv := range out {
		fmt.Println(kv.Value)
	}
	// Output:
	// o1: accepted
	// o2: no active account
}

// Keep a table's mapped values in a store of their own, queryable as
// "display-names" and logged to "<app-id>-display-names-changelog".
func ExampleMapTableValues() {
	t := eddy.NewTopology()
	users := eddy.TableFrom(t, "users", "users", serde.String(), serde.String()) // id -> name
	display := eddy.MapTableValues(users, func(id, name string) string { return strings.ToUpper(name) + " (" + id + ")" },
		eddy.Materialize("display-names", serde.String(), serde.String()))
	eddy.To(eddy.ToStream(display), "display-names", serde.String(), serde.String())
}

// The latest position of each vehicle, from a stream of position reports
// keyed by report id: ToTable re-keys through a repartition topic, so each
// vehicle's reports meet in one task, and keeps the latest in a store.
func ExampleToTable() {
	t := eddy.NewTopology()
	reports := eddy.Source(t, "reports", serde.String(), serde.String()) // report id -> "vehicle,lat,lon"
	byVehicle := eddy.SelectKey(reports, func(_, r string) string { v, _, _ := strings.Cut(r, ","); return v })
	positions := eddy.ToTable(byVehicle, "positions", serde.String(), serde.String())
	eddy.To(eddy.ToStream(positions), "positions", serde.String(), serde.String())
}
