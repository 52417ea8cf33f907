package eddy_test

import (
	"strings"
	"testing"
)

// TestRunTopNTableRefusesChangedN: an app whose TopNTable kept the first 2
// rows of each group, restarted on the same state with n 3, stops at
// task open with an error that names the store and the fix, rather than
// serve lists that miss the rows the old n never listed. The same n
// restarts as before.
func TestRunTopNTableRefusesChangedN(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 1, "players", "team-tops")
	cfg := config(t, addr)
	app := run(t, teamTops(2), cfg)
	produce(t, addr, "players", srec("p1", "red:3"), srec("p2", "red:2"), srec("p3", "red:1"))
	waitConsumed(t, addr, cfg.AppID, "players", 3, app)
	if err := app.stop(t); err != nil {
		t.Fatal(err)
	}

	app = run(t, teamTops(2), cfg)
	produce(t, addr, "players", srec("p4", "red:4"))
	waitConsumed(t, addr, cfg.AppID, "players", 4, app)
	if err := app.stop(t); err != nil {
		t.Fatalf("restarted with the same n: %v", err)
	}

	err := run(t, teamTops(3), cfg).wait(t)
	if err == nil || !strings.Contains(err.Error(), "eddy: TopNTable team-top:") || !strings.Contains(err.Error(), "first 2 rows") ||
		!strings.Contains(err.Error(), "reset the application") {
		t.Fatalf("restarted with n 3: %v, want an error naming the store, the n it kept and the fix", err)
	}
	t.Log(err)
}
