package eddy_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
)

// Sizes of the aligned join's inputs: the stream is far larger than the
// table's topic.
const (
	alignOrders   = 40_000
	alignAccounts = 100
	alignUpdates  = 1_000
)

// alignJoinTopology joins orders (key: account) with the latest value of
// their account in the table read from "accounts".
func alignJoinTopology() *eddy.Topology {
	topo := eddy.NewTopology()
	orders := eddy.Source(topo, "orders", serde.String(), serde.String())
	accounts := eddy.TableFrom(topo, "accounts", "accounts", serde.String(), serde.String())
	joined := eddy.JoinStreamTable(orders, accounts, eddy.LeftJoin, func(_ string, o, acc string, ok bool) string {
		return o + "/" + opt(acc, ok)
	})
	eddy.To(joined, "joined", serde.String(), serde.String())
	return topo
}

// TestAlignJoinChild is the app of TestStreamTableJoinAlignedThroughKills,
// run in a child process (this test binary again) that the failpoints
// SIGKILL. Run alone it skips.
func TestAlignJoinChild(t *testing.T) { childApp(t, "align-join", alignJoinTopology, 2_000) }

// TestStreamTableJoinAlignedThroughKills is the process test of issue 15:
// a stream-table join over two topics loaded before the app starts, the
// stream 40 times larger than the table's topic, the app SIGKILLed twice
// (by failpoints, mid-commit) and restarted. Every order must give exactly
// one result, the one a run that takes both inputs in timestamp order
// gives: the account's value as of the order's time. Without alignment the
// table's topic, all fetched at once, runs ahead of the orders and orders
// see later values.
func TestStreamTableJoinAlignedThroughKills(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the app as a process three times")
	}
	addr := startBroker(t)
	createTopics(t, addr, 2, "orders", "accounts", "joined")
	// Account updates at even times over the whole span of the orders,
	// orders at odd times: no ties.
	var updates []*kgo.Record
	for i := 0; i < alignUpdates; i++ {
		r := srec(fmt.Sprint("a", i%alignAccounts), fmt.Sprint("v", i))
		r.Timestamp = time.UnixMilli(int64(2 * i * (2 * alignOrders / alignUpdates)))
		updates = append(updates, r)
	}
	produce(t, addr, "accounts", updates...)
	want := map[string]string{} // order -> its result
	latest := map[string]string{}
	next := 0
	var orders []*kgo.Record
	for i := 0; i < alignOrders; i++ {
		ts := int64(2*i + 1)
		for ; next < len(updates) && updates[next].Timestamp.UnixMilli() < ts; next++ {
			latest[string(updates[next].Key)] = string(updates[next].Value)
		}
		key, order := fmt.Sprint("a", i*7%alignAccounts), fmt.Sprint("o", i)
		acc, ok := latest[key]
		want[order] = order + "/" + opt(acc, ok)
		r := srec(key, order)
		r.Timestamp = time.UnixMilli(ts)
		orders = append(orders, r)
	}
	produce(t, addr, "orders", orders...)

	runKilledThenLive(t, "TestAlignJoinChild", []string{"commit.after-end@3", "commit.before-end@2"}, addr)
	got := renderStrings(t, waitRecords(t, addr, "joined", alignOrders, nil))
	seen := map[string]bool{}
	var wrong []string
	for _, kv := range got {
		_, v, _ := strings.Cut(kv, "=")
		order, _, _ := strings.Cut(v, "/")
		if seen[order] {
			wrong = append(wrong, "duplicate "+v)
		}
		seen[order] = true
		if want[order] != v {
			wrong = append(wrong, fmt.Sprintf("%s, want %s", v, want[order]))
		}
	}
	if len(got) != alignOrders || len(wrong) > 0 {
		t.Fatalf("%d results for %d orders; %d wrong, e.g. %q", len(got), alignOrders, len(wrong), wrong[:min(len(wrong), 10)])
	}
}
