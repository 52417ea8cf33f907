package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/harness/verify"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/kafkaclient"
)

// TestLedgerWithOnlyItsACLs runs the ledger as a SASL user that has only
// the ACLs kafka.AppACLs lists (the README's table) on a broker with ACLs
// on: it processes every payment exactly once. Without them it is refused.
func TestLedgerWithOnlyItsACLs(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	rules := kafka.AppACLs(kafka.AppResources{AppID: "ledger", Inputs: []string{"payments"}, Outputs: []string{"balances"}, DeadLetters: []string{"payments.dlq"}})
	// User "ledger" gets every rule; user "lacks-I" every rule but rule I.
	users := []kafka.User{{Name: "admin", Password: "admin-pw"}, {Name: "ledger", Password: "ledger-pw"}}
	for i := range rules {
		users = append(users, kafka.User{Name: fmt.Sprintf("lacks-%d", i), Password: "ledger-pw"})
	}
	b, err := kafka.StartBroker(kafka.BrokerConfig{
		Users:      users,
		SuperUsers: []string{"admin"},
		ACLs:       true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	as := func(user, pw string) []kgo.Opt {
		opts, err := kafkaclient.Security{SASLMechanism: "SCRAM-SHA-256", SASLUser: user, SASLPassword: pw}.ClientOpts()
		if err != nil {
			t.Fatal(err)
		}
		return append(opts, kgo.SeedBrokers(b.Addr()))
	}
	admin, err := kgo.NewClient(as("admin", "admin-pw")...)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	// The operator creates the app's input and output topics, so the app
	// needs no CREATE on them (its internal and dead-letter topics it
	// creates itself).
	if err := kafka.CreateTopics(ctx, admin, kafka.TopicSpec{Name: "payments", Partitions: 4}, kafka.TopicSpec{Name: "balances", Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	for i := range n {
		acct := fmt.Sprintf("acct-%d", i%37)
		v := fmt.Sprintf(`{"id":"p%d","account":%q,"amount":%d}`, i, acct, i%100-50)
		admin.Produce(ctx, &kgo.Record{Topic: "payments", Key: []byte(acct), Value: []byte(v)}, nil)
	}
	if err := admin.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	run := func(user, stateDir string, wait func() bool) error {
		t.Setenv(kafkaclient.PasswordEnv, "ledger-pw")
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		done := make(chan error, 1)
		go func() {
			done <- Main(runCtx, []string{"--brokers", b.Addr(), "--state-dir", stateDir, "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", user, "--log-level", "error"}, os.Stderr)
		}()
		for {
			select {
			case err := <-done:
				return err
			case <-time.After(200 * time.Millisecond):
				if wait() {
					stop()
					return <-done
				}
			}
		}
	}

	// No ACLs yet: refused.
	if err := run("ledger", filepath.Join(t.TempDir(), "s"), func() bool { return false }); err == nil {
		t.Fatal("the ledger ran without any ACL")
	} else {
		t.Logf("without ACLs: %v", err)
	}

	// Every rule is needed: without any one of them the ledger stops
	// with an authorization error (rather than retrying forever).
	for i, r := range rules {
		user := fmt.Sprintf("lacks-%d", i)
		if err := kafka.CreateACLs(ctx, admin, "User:"+user, append(rules[:i:i], rules[i+1:]...)); err != nil {
			t.Fatal(err)
		}
		err := run(user, filepath.Join(t.TempDir(), "s"), func() bool { return false })
		if err == nil || !strings.Contains(err.Error(), "AUTHORIZATION_FAILED") {
			t.Errorf("without %v: %v, want an authorization error", r, err)
		}
		t.Logf("without %v: %v", r, err)
	}
	if err := kafka.CreateACLs(ctx, admin, "User:ledger", rules); err != nil {
		t.Fatal(err)
	}
	var balances []*kgo.Record
	err = run("ledger", filepath.Join(t.TempDir(), "s"), func() bool {
		balances, err = verify.ReadAll(ctx, []string{b.Addr()}, "balances", as("admin", "admin-pw")...)
		return err == nil && len(balances) >= n
	})
	if err != nil {
		t.Fatalf("the ledger with its ACLs: %v", err)
	}
	payments, err := verify.ReadAll(ctx, []string{b.Addr()}, "payments", as("admin", "admin-pw")...)
	if err != nil {
		t.Fatal(err)
	}
	rep := verify.Ledger(payments, balances)
	t.Logf("as user ledger with its ACLs only: %v", rep)
	if !rep.OK() || rep.Payments != n {
		t.Fatalf("%v, want %d payments exactly once", rep, n)
	}
}
