package demo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBrokerKillStress measures the embedded broker's gaps under SIGKILL
// (docs/design.md §6) and what eddy's own offsets change about them. It is a
// measurement, not part of CI: set EDDY_STRESS_KILLS to the number of broker
// kills per mode, e.g.
//
//	EDDY_STRESS_KILLS=20 go test ./internal/harness/demo -run TestBrokerKillStress -v -timeout 90m
//
// Each trial is a fresh broker and ledger: payments flow, the broker is
// SIGKILLed at a random moment and restarted on its data directory, and the
// output is verified. Trials run with the input offsets carried in the
// changelog (eddy) and with them ignored (group offsets alone, as Kafka
// Streams). The test fails only if a trial cannot run; the figures go to
// the log and to EDDY_STRESS_REPORT if set.
func TestBrokerKillStress(t *testing.T) {
	kills, _ := strconv.Atoi(os.Getenv("EDDY_STRESS_KILLS"))
	if kills <= 0 {
		t.Skip("a measurement run; set EDDY_STRESS_KILLS=20 to run it")
	}
	var report strings.Builder
	for _, mode := range []struct {
		name   string
		ignore string
	}{{"eddy (state offsets)", "0"}, {"group offsets only", "1"}} {
		t.Setenv(IgnoreStateOffsetsEnv, mode.ignore)
		var tally stressTally
		for i := 0; i < kills; i++ {
			var res Result
			var err error
			t.Run(fmt.Sprintf("%s/%d", mode.ignore, i+1), func(t *testing.T) { res, err = stressTrial(t, uint64(i+1)) })
			if err != nil {
				// A trial that could not finish is a finding too.
				tally.failed++
				t.Logf("%s trial %d did not finish: %v", mode.name, i+1, err)
				continue
			}
			tally.add(res)
			t.Logf("%s trial %d: %v; input produce failures %d; caught up %v; longest stall %v",
				mode.name, i+1, res.Report, res.ProduceFailures, res.CaughtUp, res.MaxStall)
			for _, e := range res.Report.Examples[:min(3, len(res.Report.Examples))] {
				t.Log("  ", e)
			}
		}
		line := fmt.Sprintf("%-22s kills %2d | unfinished %d | exact %2d | input duplicated %2d | output duplicates %2d (%d records; %d of them identical copies: a torn transaction or a batch the broker wrote twice) | missing %2d (%d) | wrong %2d (%d) | stall >10s %2d (longest %v)",
			mode.name, kills, tally.failed, tally.exact, tally.inputDup, tally.dupTrials, tally.dups, tally.dupOnly, tally.missTrials, tally.missing, tally.wrongTrials, tally.wrong, tally.stalls, tally.longest)
		t.Log(line)
		report.WriteString(line + "\n")
	}
	if path := os.Getenv("EDDY_STRESS_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(report.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type stressTally struct {
	exact, inputDup, failed            int
	dupTrials, missTrials, wrongTrials int
	dupOnly                            int
	dups, missing, wrong               int
	stalls                             int
	longest                            time.Duration
}

func (s *stressTally) add(r Result) {
	rep := r.Report
	if rep.OK() {
		s.exact++
	}
	if rep.InputDuplicates > 0 {
		s.inputDup++
	}
	if rep.Duplicates > 0 {
		s.dupTrials++
		s.dups += rep.Duplicates
		if rep.Wrong == 0 && rep.Missing == 0 {
			// Reprocessing on state that already holds the records
			// shifts every later seq and balance of the account.
			// Identical copies mean the outputs were committed and the
			// state's changelog was not (a torn transaction), or the
			// broker appended a retried batch twice.
			s.dupOnly++
		}
	}
	if rep.Missing > 0 {
		s.missTrials++
		s.missing += rep.Missing
	}
	if rep.Wrong > 0 {
		s.wrongTrials++
		s.wrong += rep.Wrong
	}
	if r.MaxStall > 10*time.Second {
		s.stalls++
	}
	s.longest = max(s.longest, r.MaxStall)
}

// stressTrial runs one broker kill: 12 s of payments with the kill at a
// random moment between 3 s and 9 s.
func stressTrial(t *testing.T, seed uint64) (Result, error) {
	t.Helper()
	broker := startBrokerProc(t)
	rng := rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano())))
	killAt := 3*time.Second + time.Duration(rng.Int64N(int64(6*time.Second)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	killDone := make(chan struct{})
	go func() {
		defer close(killDone)
		select {
		case <-time.After(killAt):
		case <-ctx.Done():
			return
		}
		broker.child.Kill()
		broker.start()
	}()
	res, err := Run(ctx, Options{
		Brokers:       []string{broker.addr},
		LedgerCommand: []string{eddyBin, "ledger"},
		WorkDir:       t.TempDir(),
		Rate:          2000,
		Accounts:      200,
		Partitions:    4,
		Duration:      12 * time.Second,
		Seed:          seed,
		StallTimeout:  90 * time.Second,
	})
	<-killDone
	return res, err
}
