package eddy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/harness/verify"
	"github.com/eddy-streams/eddy/serde"
)

// Sizes of TestToTableThroughKills's input.
const (
	toTableReports  = 40_000
	toTableVehicles = 200
)

// toTableTopology keeps the latest position of each vehicle from reports
// whose value is "vehicle,position": Map re-keys them, so ToTable goes
// through a repartition topic. Every update is written to "updates"; a
// probe (key: vehicle) is answered with the vehicle's latest position.
func toTableTopology() *eddy.Topology {
	topo := eddy.NewTopology()
	reports := eddy.Source(topo, "reports", serde.String(), serde.String())
	byVehicle := eddy.Map(reports, func(_, r string) (string, string) {
		vehicle, pos, _ := strings.Cut(r, ",")
		return vehicle, pos
	})
	latest := eddy.ToTable(byVehicle, "latest", serde.String(), serde.String())
	eddy.To(eddy.ToStream(latest), "updates", serde.String(), serde.String())
	probes := eddy.Source(topo, "probes", serde.String(), serde.String())
	answers := eddy.JoinStreamTable(probes, latest, eddy.LeftJoin, func(_, probe, pos string, ok bool) string {
		return probe + "/" + opt(pos, ok)
	})
	eddy.To(answers, "answers", serde.String(), serde.String())
	return topo
}

// TestToTableChild is the app of TestToTableThroughKills, run in a child
// process (this test binary again) that the failpoints SIGKILL. Run alone
// it skips.
func TestToTableChild(t *testing.T) { childApp(t, "to-table", toTableTopology, 1_000) }

// TestToTableThroughKills is ToTable's process test: reports loaded before
// the app starts, the app SIGKILLed twice by failpoints (once after a
// transaction committed and before the state applied it, once before the
// commit) and restarted on the same state directory. The table cache is on
// (the default), so a vehicle's reports of one transaction give one
// update, the latest: each vehicle's updates must be its positions in
// order, none twice (an aborted transaction's updates never show), ending
// with its last; and fewer than the reports (the cache collapsed). The store's
// changelog must hold each vehicle's last position; and probes sent to the
// last run must see that position, from the state the kills left.
func TestToTableThroughKills(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the app as a process three times")
	}
	addr := startBroker(t)
	createTopics(t, addr, 2, "reports", "probes", "updates", "answers")
	// Keyed by vehicle, so one vehicle's reports are in one partition, in
	// order: its last report is its latest position.
	var reports []*kgo.Record
	positions := map[string][]string{}
	for i := 0; i < toTableReports; i++ {
		vehicle, pos := fmt.Sprint("v", i*7%toTableVehicles), fmt.Sprint("p", i)
		r := srec(vehicle, vehicle+","+pos)
		r.Timestamp = time.UnixMilli(int64(i + 1))
		reports = append(reports, r)
		positions[vehicle] = append(positions[vehicle], pos)
	}
	produce(t, addr, "reports", reports...)

	// Each record crosses two sub-topologies, so a run makes at least 80
	// transactions of at most CommitRecords: the first run reaches its
	// 55th, the next, with more than 25 left, its 10th. (As the worker
	// schedules tasks now, the reports' part takes the first 40, so both
	// kills land in the ToTable tasks' work: the next runs restore them
	// from the changelog.)
	runKilledThenLive(t, "TestToTableChild", []string{"commit.after-end@55", "commit.before-end@10"}, addr)

	lastPositions := map[string]string{}
	for vehicle, ps := range positions {
		lastPositions[vehicle] = ps[len(ps)-1]
	}
	recs := waitLast(t, addr, "updates", lastPositions)
	updates := byKey(decode(t, recs, serde.String(), serde.String()))
	for vehicle, want := range positions {
		if got := updates[vehicle]; !inOrderOnce(got, want) {
			t.Errorf("updates of %s: %d of %d reports, not its positions in order, each at most once, ending with the last; first %q, want from %q",
				vehicle, len(got), len(want), got[:min(len(got), 5)], want[:min(len(want), 5)])
		}
	}
	if len(updates) != len(positions) {
		t.Errorf("updates of %d vehicles, want %d", len(updates), len(positions))
	}
	if len(recs) >= toTableReports {
		t.Errorf("%d updates of %d reports: the table cache collapsed none", len(recs), toTableReports)
	}

	stored := changelogState(t, addr, changelogTopic("to-table", "latest"))
	if len(stored) != len(positions) {
		t.Errorf("the changelog of latest holds %d keys, want %d", len(stored), len(positions))
	}
	var probes []*kgo.Record
	want := map[string]string{}
	for vehicle, ps := range positions {
		if got := string(stored[vehicle]); got != ps[len(ps)-1] {
			t.Errorf("changelog of latest: %s=%q, want %q", vehicle, got, ps[len(ps)-1])
		}
		probe := "probe-" + vehicle
		want[probe] = probe + "/" + ps[len(ps)-1]
		probes = append(probes, srec(vehicle, probe))
	}
	probes = append(probes, srec("no-such-vehicle", "probe-none"))
	want["probe-none"] = "probe-none/-"
	for _, p := range probes {
		p.Timestamp = time.UnixMilli(toTableReports + 1)
	}
	produce(t, addr, "probes", probes...)
	got := map[string][]string{}
	for _, r := range waitRecords(t, addr, "answers", len(probes), nil) {
		probe, _, _ := strings.Cut(string(r.Value), "/")
		got[probe] = append(got[probe], string(r.Value))
	}
	for probe, w := range want {
		if a := got[probe]; len(a) != 1 || a[0] != w {
			t.Errorf("answers to %s: %q, want exactly %q", probe, a, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("answers to %d probes, want %d", len(got), len(want))
	}
}

// waitLast reads topic until each key of want has a record and its last
// record's value is want's, and returns the topic's records: the wait for
// a table's updates when the table cache may have collapsed some.
func waitLast(t *testing.T, addr, topic string, want map[string]string) []*kgo.Record {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		recs, err := verify.ReadAll(ctx, []string{addr}, topic)
		cancel()
		if err == nil {
			last := map[string]string{}
			for _, r := range recs {
				last[string(r.Key)] = string(r.Value)
			}
			done := true
			for k, v := range want {
				if got, ok := last[k]; !ok || got != v {
					done = false
					break
				}
			}
			if done {
				return recs
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s lacks some key's latest value after %v (last read error: %v)", topic, hangGuard, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// inOrderOnce reports whether got is a subsequence of want (each value at
// most once, in want's order) that ends with want's last value.
func inOrderOnce(got, want []string) bool {
	if len(got) == 0 || len(want) == 0 || got[len(got)-1] != want[len(want)-1] {
		return false
	}
	i := 0
	for _, g := range got {
		for i < len(want) && want[i] != g {
			i++
		}
		if i == len(want) {
			return false
		}
		i++
	}
	return true
}
