package demo

import (
	"context"
	"testing"
	"time"
)

// TestFailoverToStandby SIGKILLs one of two ledger processes that keep one
// standby per task, under load, once the survivor's standbys of its tasks
// caught up. The survivor must take the tasks over replaying only a short
// changelog tail (a takeover without standbys replays the whole changelog,
// which TestStandbyTakesOverWithATail shows in-process), and every payment
// must have exactly one correct balance.
func TestFailoverToStandby(t *testing.T) {
	if testing.Short() {
		t.Skip("failover test runs processes for about a minute")
	}
	t.Parallel() // its own broker; mostly waiting on the group (see main_test.go)
	broker := startBrokerProc(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	res, err := Failover(ctx, FailoverOptions{
		Brokers:         []string{broker.addr},
		LedgerCommand:   []string{eddyBin, "ledger"},
		WorkDir:         t.TempDir(),
		Instances:       2,
		Partitions:      4,
		StandbyReplicas: 1,
		Preload:         40_000,
		Accounts:        20_000,
		Rate:            500,
		Before:          3 * time.Second,
		After:           2 * time.Second,
		Seed:            uint64(time.Now().UnixNano()),
		Out:             testWriter{t},
	})
	if err != nil {
		for _, l := range res.Logs {
			t.Logf("%s, last lines:\n%s", l, tail(l, 30))
		}
		t.Fatal(err)
	}
	t.Log(res)
	for _, e := range res.Report.Examples {
		t.Log(e)
	}
	if !res.Report.OK() || res.Report.Payments < 40_000 {
		t.Fatalf("exactly-once violated through the failover: %v", res.Report)
	}
	if perTask := res.Changelog / int64(len(res.Tasks)); perTask < 5000 {
		t.Fatalf("the killed tasks' changelogs hold %d offsets each; too few to tell a tail from a full restore", perTask)
	}
	if res.Replayed*4 > res.Changelog {
		t.Fatalf("the survivor replayed %d of the killed tasks' %d changelog offsets: its standbys should have left only a tail", res.Replayed, res.Changelog)
	}
}
