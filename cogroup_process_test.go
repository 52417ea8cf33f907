package eddy_test

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
)

// Sizes of TestCogroupThroughKills's input.
const (
	cogroupClicks = 30_000
	cogroupOrders = 30_000
	cogroupUsers  = 150
)

// cogroupTally is the aggregate of TestCogroupThroughKills: clicks and
// orders counted, order amounts summed.
type cogroupTally struct{ clicks, orders, spent int64 }

func (c cogroupTally) String() string {
	return fmt.Sprintf("c=%d o=%d s=%d", c.clicks, c.orders, c.spent)
}

func parseTally(s string) (cogroupTally, error) {
	var c cogroupTally
	_, err := fmt.Sscanf(s, "c=%d o=%d s=%d", &c.clicks, &c.orders, &c.spent)
	return c, err
}

// cogroupProcessTopology cogroups clicks (keyed by user) with orders
// (keyed by order id, value "user,amount"), which GroupBy re-keys through
// the repartition topic "by-user": one tally per user in the store
// "tallies", every update written to "tallies".
func cogroupProcessTopology() *eddy.Topology {
	topo := eddy.NewTopology()
	clicks := eddy.GroupByKey(eddy.Source(topo, "clicks", serde.String(), serde.String()), serde.String())
	orders := eddy.GroupBy(eddy.Source(topo, "orders", serde.String(), serde.String()),
		func(_, v string) string { user, _, _ := strings.Cut(v, ","); return user },
		"by-user", serde.String(), serde.String())
	cg := eddy.Cogroup(clicks, func(_ string, _ string, agg string) string {
		c, err := parseTally(agg)
		if err != nil {
			panic(err)
		}
		c.clicks++
		return c.String()
	})
	cg = eddy.CogroupWith(cg, orders, func(_ string, v string, agg string) string {
		c, err := parseTally(agg)
		if err != nil {
			panic(err)
		}
		_, amount, _ := strings.Cut(v, ",")
		n, err := strconv.ParseInt(amount, 10, 64)
		if err != nil {
			panic(err)
		}
		c.orders++
		c.spent += n
		return c.String()
	})
	tallies := eddy.CogroupAggregate(cg, "tallies", func() string { return cogroupTally{}.String() }, serde.String())
	eddy.To(eddy.ToStream(tallies), "tallies", serde.String(), serde.String())
	return topo
}

// TestCogroupChild is the app of TestCogroupThroughKills, run in a child
// process (this test binary again) that the failpoints SIGKILL. Run alone
// it skips.
func TestCogroupChild(t *testing.T) { childApp(t, "cogroup", cogroupProcessTopology, 1_000) }

// TestCogroupThroughKills is Cogroup's process test: clicks and orders
// loaded before the app starts, the app SIGKILLed twice by failpoints
// (once after a transaction committed and before the state applied it,
// once before the commit) and restarted on the same state directory.
// The table cache is on (the default), so a user's updates within one
// transaction show as one, the latest: each update must add clicks or
// orders of that user to the previous one, never take any away or repeat
// it (an aborted transaction's updates never show), with fewer updates
// than records (the cache collapsed some); and the last update and the
// store's changelog hold the user's totals, which count every record
// exactly once.
func TestCogroupThroughKills(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the app as a process three times")
	}
	addr := startBroker(t)
	createTopics(t, addr, 2, "clicks", "orders", "tallies")
	var clicks, orders []*kgo.Record
	want := map[string]cogroupTally{}
	amounts := map[string]map[int64]bool{} // user -> its orders' amounts
	for i := 0; i < cogroupClicks; i++ {
		user := fmt.Sprint("u", i*7%cogroupUsers)
		r := srec(user, "page")
		r.Timestamp = time.UnixMilli(int64(2*i + 1))
		clicks = append(clicks, r)
		c := want[user]
		c.clicks++
		want[user] = c
	}
	for i := 0; i < cogroupOrders; i++ {
		user, amount := fmt.Sprint("u", i*11%cogroupUsers), int64(i+1)
		r := srec(fmt.Sprint("order-", i), fmt.Sprint(user, ",", amount))
		r.Timestamp = time.UnixMilli(int64(2*i + 2))
		orders = append(orders, r)
		c := want[user]
		c.orders++
		c.spent += amount
		want[user] = c
		if amounts[user] == nil {
			amounts[user] = map[int64]bool{}
		}
		amounts[user][amount] = true
	}
	produce(t, addr, "clicks", clicks...)
	produce(t, addr, "orders", orders...)

	// The orders cross two sub-topologies, the clicks one: a run makes at
	// least 90 transactions of at most CommitRecords, so the first run
	// reaches its 55th and the next, with more than 35 left, its 10th.
	runKilledThenLive(t, "TestCogroupChild", []string{"commit.after-end@55", "commit.before-end@10"}, addr)

	total := cogroupClicks + cogroupOrders
	finals := map[string]string{}
	for user, w := range want {
		finals[user] = w.String()
	}
	recs := waitLast(t, addr, "tallies", finals)
	if len(recs) >= total {
		t.Errorf("%d updates of %d records: the table cache collapsed none", len(recs), total)
	}
	updates := byKey(decode(t, recs, serde.String(), serde.String()))
	for user, w := range want {
		var prev cogroupTally
		for i, u := range updates[user] {
			c, err := parseTally(u)
			if err != nil {
				t.Fatalf("update %d of %s: %q: %v", i, user, u, err)
			}
			grew := c.clicks >= prev.clicks && c.orders >= prev.orders && c.spent >= prev.spent && c != prev
			// What the orders added is a sum of as many of the user's
			// amounts: at least the smallest ones', at most the largest.
			added := c.orders - prev.orders
			if !grew || c.spent-prev.spent < minSum(amounts[user], added) || c.spent-prev.spent > maxSum(amounts[user], added) {
				t.Errorf("update %d of %s: %v after %v: not the previous tally plus clicks and orders of the user", i, user, c, prev)
				break
			}
			prev = c
		}
		if prev != w {
			t.Errorf("last update of %s: %v, want %v", user, prev, w)
		}
	}
	if len(updates) != len(want) {
		t.Errorf("updates of %d users, want %d", len(updates), len(want))
	}

	stored := changelogState(t, addr, changelogTopic("cogroup", "tallies"))
	if len(stored) != len(want) {
		t.Errorf("the changelog of tallies holds %d keys, want %d", len(stored), len(want))
	}
	for user, w := range want {
		if got := string(stored[user]); got != w.String() {
			t.Errorf("changelog of tallies: %s=%q, want %q", user, got, w)
		}
	}
}

// minSum and maxSum are the smallest and largest sums of n of amounts.
func minSum(amounts map[int64]bool, n int64) int64 { return extremeSum(amounts, n, false) }
func maxSum(amounts map[int64]bool, n int64) int64 { return extremeSum(amounts, n, true) }

func extremeSum(amounts map[int64]bool, n int64, largest bool) int64 {
	all := slices.Sorted(maps.Keys(amounts))
	if largest {
		slices.Reverse(all)
	}
	var sum int64
	for _, a := range all[:min(int(n), len(all))] {
		sum += a
	}
	return sum
}
