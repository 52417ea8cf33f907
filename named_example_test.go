package eddy_test

import (
	"fmt"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
)

// Count clicks per user: the clicks are keyed by session, so SelectKey
// re-keys them and GroupByKey sends them through a repartition topic.
// Named keeps its name when operators are added before it (a Filter of
// bots, later); unnamed it would be "clicks-rekey-2-repartition", then
// "clicks-rekey-3-repartition".
func ExampleNamed() {
	t := eddy.NewTopology()
	clicks := eddy.Source(t, "clicks", serde.String(), serde.String()) // session -> user
	clicks = eddy.Filter(clicks, func(_, user string) bool { return user != "" })
	byUser := eddy.Named(eddy.SelectKey(clicks, func(_, user string) string { return user }), "by-user")
	counts := eddy.Count(eddy.GroupByKey(byUser, serde.String()), "clicks-per-user")
	eddy.To(eddy.ToStream(counts), "click-counts", serde.String(), serde.Int64())

	d := t.Describe("clicks")
	fmt.Println(d.RepartitionTopics)
	for _, sub := range d.Subtopologies {
		for _, n := range sub.Nodes {
			if n.Named {
				fmt.Println("named:", n.Name)
			}
		}
		for _, st := range sub.Stores {
			fmt.Println("store:", st.Name, st.Changelog)
		}
	}
	// Output:
	// [clicks-by-user-repartition]
	// named: by-user
	// store: clicks-per-user clicks-clicks-per-user-changelog
}
