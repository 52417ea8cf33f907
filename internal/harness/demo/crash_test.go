package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestLedgerSurvivesKillsAndBrokerRestart is the crash test of the exactly
// once promise: the ledger runs as a real process against `eddy broker`,
// is SIGKILLed at random moments at least five times while payments flow,
// the broker is stopped with SIGTERM and restarted once half-way, and then
// every balance record is checked against a sequential computation.
func TestLedgerSurvivesKillsAndBrokerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs processes for about a minute")
	}
	broker := startBrokerProc(t)
	res := runLedgerCrash(t, broker, Options{}, 10000)
	checkWithKcat(t, broker.addr, res.Report.Outputs)
}

// runLedgerCrash runs the ledger against broker with opts completed as
// the crash tests run it (1,000 payments/s to 200 accounts for 25 s, a
// SIGKILL about every 2.5 s unless opts says otherwise, the broker
// restarted half-way unless opts has its own MidRun), and fails the test unless the run was exactly once
// with at least five kills and minPayments payments.
func runLedgerCrash(t *testing.T, broker *brokerProc, opts Options, minPayments int) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	opts.Brokers = []string{broker.addr}
	opts.LedgerCommand = []string{eddyBin, "ledger"}
	opts.WorkDir = t.TempDir()
	opts.Rate, opts.Accounts, opts.Partitions = 1000, 200, 4
	opts.Duration = 25 * time.Second
	if opts.CrashEvery == 0 {
		opts.CrashEvery = 2500 * time.Millisecond
	}
	opts.Seed = uint64(time.Now().UnixNano())
	opts.Out = testWriter{t}
	if opts.MidRun == nil {
		opts.MidRun = broker.restart
	}
	res, err := Run(ctx, opts)
	if err != nil {
		t.Fatalf("%v\nledger log, last lines:\n%s", err, tail(res.LedgerLog, 40))
	}
	t.Logf("%v; crashes %d; dead letters %d of %d; recoveries %v", res.Report, res.Crashes, res.DeadLetters, res.Invalid, res.Resumes)
	for _, e := range res.Report.Examples {
		t.Log(e)
	}
	if res.Crashes < 5 {
		t.Fatalf("only %d SIGKILLs happened; the test needs at least 5", res.Crashes)
	}
	if !res.OK() {
		t.Fatalf("exactly-once violated: %v, dead letters %d for %d malformed payments (ledger log %s)", res.Report, res.DeadLetters, res.Invalid, res.LedgerLog)
	}
	if res.Report.Payments < minPayments {
		t.Fatalf("only %d payments went through; the workload did not run", res.Report.Payments)
	}
	return res
}

// checkWithKcat reads the balances with librdkafka's kcat, a non-Go
// read_committed client, and checks it sees the same records: one per
// payment id. CI installs kcat; elsewhere the check is skipped when kcat is
// missing. props are further librdkafka properties (-X), e.g. TLS and SASL.
func checkWithKcat(t *testing.T, addr string, want int, props ...string) {
	t.Helper()
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("kcat is not installed; .ci/run must install it")
		}
		t.Log("kcat not installed; skipping the non-Go client check")
		return
	}
	args := []string{"-b", addr, "-C", "-t", "balances", "-e", "-q", "-X", "isolation.level=read_committed", "-f", "%s\n"}
	for _, p := range props {
		args = append(args, "-X", p)
	}
	out, err := exec.Command(kcat, args...).Output()
	if err != nil {
		t.Fatalf("kcat: %v", err)
	}
	ids := map[string]int{}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var b struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &b); err != nil {
			t.Fatalf("kcat read a record that is not a balance: %q", sc.Text())
		}
		ids[b.ID]++
		n++
	}
	if n != want || len(ids) != want {
		t.Fatalf("kcat read %d records with %d distinct payment ids; want %d of each", n, len(ids), want)
	}
	t.Logf("kcat (read_committed) read %d balance records, one per payment", n)
}

// tail returns the last n lines of the file at path, for failure messages
// (the test's temporary directory is gone once it ends).
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
