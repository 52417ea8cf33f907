package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ledger "github.com/eddy-streams/eddy/examples/ledger/pipeline"
	"github.com/eddy-streams/eddy/internal/harness/verify"
)

// TestLedgerQueries runs examples/ledger as a process with --http under a
// payment generator's load, queries its balances store while the load
// runs, and, once the input stopped and every balance is out, checks that
// GET /v1/stores/balances/keys/{account} answers each account's seq and
// balance as its last balance record says, and that `eddy query` prints
// the same.
func TestLedgerQueries(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the broker and the ledger as processes")
	}
	broker := startBrokerProc(t)
	dir := t.TempDir()
	httpAddr := freeAddr(t)
	logf, err := os.Create(filepath.Join(dir, "ledger.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	app, err := StartChild([]string{eddyBin, "ledger", "--brokers", broker.addr, "--state-dir", filepath.Join(dir, "state"),
		"--partitions", "4", "--http", httpAddr}, logf, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Stop(30 * time.Second) })
	base := "http://" + httpAddr
	waitFor(t, "the ledger's /healthz", app, func() error {
		status, body, err := get(base + "/healthz")
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("%d %s", status, body)
		}
		return err
	})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	gen := &Generator{Seeds: []string{broker.addr}, Topic: "payments", Rate: 800, Accounts: 40, Seed: uint64(time.Now().UnixNano())}
	genCtx, stopGen := context.WithTimeout(ctx, 6*time.Second)
	genDone := make(chan error, 1)
	go func() { genDone <- gen.Run(genCtx) }()

	// Under load: each answer is an account's state or a 404 for an
	// account not seen yet, never an error.
	answered := 0
	for genCtx.Err() == nil {
		for k := range gen.Accounts {
			status, body, err := get(fmt.Sprintf("%s/v1/stores/balances/keys/acct-%04d", base, k))
			if err != nil {
				t.Fatalf("query under load: %v", err)
			}
			switch status {
			case http.StatusOK:
				var acc ledger.Account
				if err := json.Unmarshal(body, &acc); err != nil || acc.Seq < 1 {
					t.Fatalf("query under load: %s (%v), want an account with a seq", body, err)
				}
				answered++
			case http.StatusNotFound, http.StatusServiceUnavailable:
			default:
				t.Fatalf("query under load: %d %s", status, body)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopGen()
	if err := <-genDone; err != nil && ctx.Err() == nil && genCtx.Err() == nil {
		t.Fatalf("generator: %v", err)
	}
	if answered == 0 {
		t.Fatal("no query answered 200 while the load ran")
	}
	produced := gen.Produced()
	t.Logf("%d payments produced; %d queries answered 200 under load", produced, answered)

	// Every payment has its balance record: the last one per account is
	// the account's committed state.
	var last map[string]ledger.Balance
	waitFor(t, "every balance record", app, func() error {
		recs, err := verify.ReadAll(ctx, []string{broker.addr}, "balances")
		if err != nil {
			return err
		}
		if int64(len(recs)) < produced {
			return fmt.Errorf("%d balances of %d payments", len(recs), produced)
		}
		last = map[string]ledger.Balance{}
		for _, r := range recs { // partition by partition, in offset order
			b, err := ledger.BalanceSerde{}.Deserialize(r.Value)
			if err != nil {
				return err
			}
			last[b.Account] = b
		}
		return nil
	})
	for acct, b := range last {
		waitFor(t, "GET "+acct, app, func() error {
			status, body, err := get(base + "/v1/stores/balances/keys/" + acct)
			if err != nil {
				return err
			}
			var acc ledger.Account
			if status != http.StatusOK || json.Unmarshal(body, &acc) != nil || acc.Seq != b.Seq || acc.Balance != b.Balance {
				return fmt.Errorf("%d %s, want seq %d balance %d", status, body, b.Seq, b.Balance)
			}
			return nil
		})
	}
	t.Logf("%d accounts answered with their last balance record's seq and balance", len(last))

	// The operator command prints the same JSON.
	acct := "acct-0001"
	out, err := exec.Command(eddyBin, "query", "--http", httpAddr, "--store", "balances", "--key", acct).CombinedOutput()
	var acc ledger.Account
	if err != nil || json.Unmarshal(out, &acc) != nil || acc.Seq != last[acct].Seq || acc.Balance != last[acct].Balance {
		t.Fatalf("eddy query: %s (%v), want seq %d balance %d", out, err, last[acct].Seq, last[acct].Balance)
	}
	out, err = exec.Command(eddyBin, "query", "--http", httpAddr, "--store", "balances", "--prefix", "acct-001").CombinedOutput()
	var scan struct {
		Entries []struct {
			Key   string
			Value ledger.Account
		}
	}
	if err != nil || json.Unmarshal(out, &scan) != nil {
		t.Fatalf("eddy query --prefix: %s (%v)", out, err)
	}
	want := 0
	for a := range last {
		if strings.HasPrefix(a, "acct-001") {
			want++
		}
	}
	if len(scan.Entries) != want {
		t.Fatalf("eddy query --prefix acct-001: %d entries, want %d: %s", len(scan.Entries), want, out)
	}
	for _, e := range scan.Entries {
		if e.Value.Seq != last[e.Key].Seq || e.Value.Balance != last[e.Key].Balance {
			t.Errorf("prefix scan: %s = %+v, want %+v", e.Key, e.Value, last[e.Key])
		}
	}
	out, err = exec.Command(eddyBin, "query", "--http", httpAddr, "--store", "nope", "--key", acct).CombinedOutput()
	if err == nil || !strings.Contains(string(out), `unknown store "nope"`) || !strings.Contains(string(out), "balances") {
		t.Fatalf("eddy query of an unknown store: %s (%v); want an error listing the stores", out, err)
	}
}

func get(u string) (int, []byte, error) {
	resp, err := http.Get(u)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// waitFor retries check until it succeeds, failing at once if the child
// exited and after a guard against hangs (not a speed assertion).
func waitFor(t *testing.T, what string, c *Child, check func() error) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case <-c.Done():
			t.Fatalf("%s: the ledger exited: %v (last: %v)", what, c.Err(), err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
