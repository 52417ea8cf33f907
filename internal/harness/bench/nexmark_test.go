package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/testutil"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/nexmark/queries"
)

// Every query runs through the in-process runner with Pebble state and
// frequent commits, and its output must match the reference: the queries'
// own tests use eddytest's memory stores and a commit per record.
func TestNexmarkGeneratorSourceVerifies(t *testing.T) {
	all := queries.All()
	if len(all) == 0 {
		t.Fatal("no queries")
	}
	for _, q := range all {
		t.Run(q.Name, func(t *testing.T) {
			res, err := Nexmark(t.Context(), NexmarkOptions{Query: q, Events: 60_000, Seed: 3, EventRate: 2000, CommitInterval: 5 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Verified {
				t.Fatalf("not verified: %s", res.VerifyError)
			}
			if res.Outputs == 0 || res.Commits < 2 || res.CPUSeconds <= 0 || res.PeakRSSBytes <= 0 {
				t.Fatalf("implausible result %+v", res)
			}
		})
	}
}

// The Kafka source: every query over an `eddy broker` process, exactly
// once, its output read back (q10's: the files it committed) and checked.
// One broker holds the events for all of them, written once.
func TestNexmarkKafkaSourceVerifies(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the eddy binary and runs a broker")
	}
	bin, cleanup, err := testutil.BuildEddy("eddy-nexmark-")
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	events := NexmarkOptions{Events: 20_000, EventRate: 1000}
	broker, err := StartNexmarkBroker(t.Context(), bin, t.TempDir(), events)
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	// q8 joins two inputs in event time over topics loaded before the
	// app starts: it verifies because a task processes its inputs in
	// timestamp order (docs/design.md §5.2), so neither input runs past
	// the other's grace. q3 and q4 join two inputs with regular joins,
	// in whatever order their records come. q13 reads its side input
	// from a topic into a global table before the bids run.
	var ran []queries.Query
	for _, q := range queries.All() {
		t.Run(q.Name, func(t *testing.T) {
			// The app runs bounded: its end closes the last windows,
			// and the checks expect every window, as in-process.
			opts := events
			opts.Query, opts.CommitInterval = q, 100*time.Millisecond
			res, err := broker.Run(t.Context(), opts)
			if err != nil {
				t.Fatal(err)
			}
			ran = append(ran, q)
			if !res.Verified || res.Outputs == 0 {
				t.Errorf("not verified (%d outputs): %s", res.Outputs, res.VerifyError)
			}
		})
	}
	// A broker holds one set of events and each query's app once: a run
	// asking for others, or a query again, is refused, not resumed.
	if len(ran) == 0 {
		return
	}
	other := events
	other.Query, other.Events = ran[0], events.Events+1
	if _, err := broker.Run(t.Context(), other); err == nil || !strings.Contains(err.Error(), "the broker holds") {
		t.Errorf("a run of other events: %v; want a refusal", err)
	}
	again := events
	again.Query = ran[0]
	if _, err := broker.Run(t.Context(), again); err == nil || !strings.Contains(err.Error(), "ran on this broker already") {
		t.Errorf("%s again: %v; want a refusal", ran[0].Name, err)
	}
	// NexmarkKafka, the command's run of one query, starts a broker of
	// its own in the run's directory.
	one := events
	one.Query, one.Dir = ran[0], t.TempDir()
	res, err := NexmarkKafka(t.Context(), one, bin)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verified || res.Outputs == 0 {
		t.Errorf("NexmarkKafka %s: %+v", ran[0].Name, res)
	}
}

// TestNexmarkResults: --results writes an append-only result's rows as
// they come (one per output record) and an updating result's last rows
// (one per key), a JSON object a row with the SQL's columns.
func TestNexmarkResults(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"q2", "q4"} {
		q, _ := queries.Lookup(name)
		res, err := Nexmark(t.Context(), NexmarkOptions{Query: q, Events: 50_000, Results: dir})
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, name+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		for _, l := range lines {
			var row map[string]any
			if err := json.Unmarshal([]byte(l), &row); err != nil {
				t.Fatalf("%s: %q: %v", name, l, err)
			}
			for _, c := range q.Result.Columns {
				if _, ok := row[c]; !ok {
					t.Fatalf("%s: row %q lacks column %s", name, l, c)
				}
			}
		}
		want := int(res.Outputs) // q2: a row per record
		if name == "q4" {
			want = nexmark.NumCategories // a row per category, its last average
		}
		if len(lines) != want || res.Outputs == 0 {
			t.Errorf("%s: %d rows from %d outputs, want %d", name, len(lines), res.Outputs, want)
		}
	}
}

func TestNexmarkGeneratorCeiling(t *testing.T) {
	res, err := NexmarkGenerator(NexmarkOptions{Events: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outputs != 100_000 || res.CPUSeconds <= 0 || res.EventsPerCPUSecond <= 0 {
		t.Fatalf("implausible result %+v", res)
	}
}

// A state directory is the run's alone: a second run into it would resume
// from the first's state, process nothing and report a rate of nothing.
func TestNexmarkRefusesAUsedStateDir(t *testing.T) {
	q, _ := queries.Lookup("q5")
	dir := t.TempDir()
	opts := NexmarkOptions{Query: q, Events: 20_000, Dir: dir}
	if _, err := Nexmark(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	_, err := Nexmark(t.Context(), opts)
	if err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Fatalf("second run into %s: %v; want a not-empty error", dir, err)
	}
}

// With two workers the queries run over two partitions, the generator's
// work split between them, and their output still matches the reference:
// repartitions, joins and windows across partitions, the sink called from
// both workers.
func TestNexmarkGeneratorSourceVerifiesWithWorkers(t *testing.T) {
	for _, q := range queries.All() {
		t.Run(q.Name, func(t *testing.T) {
			res, err := Nexmark(t.Context(), NexmarkOptions{Query: q, Events: 60_000, Seed: 3, EventRate: 2000, CommitInterval: 5 * time.Millisecond, Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Verified {
				t.Fatalf("not verified: %s", res.VerifyError)
			}
			if res.Outputs == 0 || res.Commits < 2 || res.Workers != 2 {
				t.Fatalf("implausible result %+v", res)
			}
		})
	}
}
