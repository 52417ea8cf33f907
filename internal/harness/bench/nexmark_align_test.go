package bench

import (
	"os"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/testutil"
	"github.com/eddy-streams/eddy/nexmark/queries"
)

// TestNexmarkKafkaJoinsVerify: the queries that join two inputs in event
// time (q3, q4, q8) verify over the Kafka source, whose topics are loaded
// before the app starts: a task processes its inputs in timestamp order
// (docs/design.md §5.2), so neither input runs past the other's grace.
func TestNexmarkKafkaJoinsVerify(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the eddy binary and runs a broker")
	}
	bin, cleanup, err := testutil.BuildEddy("eddy-nexmark-")
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	for _, name := range []string{"q3", "q4", "q8"} {
		q, ok := queries.Lookup(name)
		if !ok {
			t.Fatalf("no query %s", name)
		}
		res, err := NexmarkKafka(t.Context(), NexmarkOptions{Query: q, Events: 100_000, CommitInterval: 100 * time.Millisecond, Progress: os.Stderr}, bin)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Verified || res.Outputs == 0 {
			t.Errorf("%s: not verified (%d outputs): %s", name, res.Outputs, res.VerifyError)
		}
	}
}
