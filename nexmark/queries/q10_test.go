package queries

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

func q10Corruptions() []corruption {
	return []corruption{
		dropOne(func(n int) int { return n / 2 }),
		{"one record twice", func(outs []output) []output { return append(outs, outs[5]) }},
		{"one price changed", func(outs []output) []output {
			v := bytes.Clone(outs[3].value)
			i := bytes.IndexByte(v, ',') + 1
			i += bytes.IndexByte(v[i:], ',') + 1
			v[i] = '0' + (v[i]-'0'+1)%10
			return withValue(outs, 3, v)
		}},
		{"one line in the next minute's partition", func(outs []output) []output {
			k := bytes.Clone(outs[2].key)
			k[len(k)-1] = '0' + (k[len(k)-1]-'0'+1)%10
			outs[2].key = k
			return outs
		}},
	}
}

// TestQ10: every bid's line in its minute's partition, at the test rate
// (100 events/s: minutes of partitions, delays up to 3 s) and the suite's
// (10M events/s, from a millisecond before midnight: two days).
func TestQ10(t *testing.T) {
	const n = 30_000
	outs := testQuery(t, q10(), testConfig, n, 20_000, q10Corruptions()...)
	parts := map[string]bool{}
	for _, o := range outs {
		parts[string(o.key)] = true
	}
	if len(parts) < 3 {
		t.Errorf("%d partitions: the test proves little about partitioning", len(parts))
	}
	suite := nexmark.Config{Seed: 7, EventsPerSecond: 10_000_000, BaseTime: nexmark.DefaultBaseTime - 1}
	outs = testQuery(t, q10(), suite, n, 20_000, q10Corruptions()...)
	days := map[string]bool{}
	for _, o := range outs {
		days[string(o.key[:len("dt=2026-01-01")])] = true
	}
	if len(days) != 2 {
		t.Errorf("partitions of %d days, want 2 (the run crosses midnight)", len(days))
	}
}

// TestQ10Result: a line of the files reads back as the bid's row.
func TestQ10Result(t *testing.T) {
	g, err := nexmark.New(testConfig)
	if err != nil {
		t.Fatal(err)
	}
	outs := run(t, q10(), g, 200)
	var bids []nexmark.Bid
	for i := range int64(200) {
		if e := g.Event(i); e.Kind == nexmark.KindBid {
			bids = append(bids, e.Bid)
		}
	}
	if len(outs) != len(bids) {
		t.Fatalf("%d lines, want %d", len(outs), len(bids))
	}
	// The lines are read partition by partition: match them by value.
	rows := map[string][]any{}
	for _, o := range outs {
		err := q10Result().Rows(o.key, o.value, func(v ...any) {
			if len(v) != 7 {
				t.Fatalf("%d values", len(v))
			}
			rows[string(o.value)] = v
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range bids {
		line := appendTimestamp(nil, b.DateTime)
		var row []any
		for l, r := range rows {
			if strings.Contains(l, string(line)) && r[0] == b.Auction && r[1] == b.Bidder {
				row = r
			}
		}
		ts := Timestamp(b.DateTime)
		want := []any{b.Auction, b.Bidder, b.Price, ts, b.Extra, ts[:10], ts[11:16]}
		if len(row) != 7 {
			t.Fatalf("no row for bid %+v", b)
		}
		for i := range want {
			if row[i] != want[i] {
				t.Fatalf("bid %+v: row %v, want %v", b, row, want)
			}
		}
	}
}

// TestQ10Encoding: the query's allocation-free formatting is the
// standard library's, and CSV fields round-trip.
func TestQ10Encoding(t *testing.T) {
	for _, ms := range []int64{0, 1, 999, 59_999, 60_000, nexmark.DefaultBaseTime - 1, nexmark.DefaultBaseTime + 86_399_999, 253402300799999} {
		if got, want := string(appendTimestamp(nil, ms)), Timestamp(ms); got != want {
			t.Errorf("appendTimestamp(%d) = %s, want %s", ms, got, want)
		}
		ts := Timestamp(ms)
		if got, want := string(appendMinutePartition(nil, ms)), "dt="+ts[:10]+"/hm="+ts[11:16]; got != want {
			t.Errorf("appendMinutePartition(%d) = %s, want %s", ms, got, want)
		}
		if start, ok := minutePartitionTime(string(appendMinutePartition(nil, ms))); !ok || start != ms-ms%60_000 {
			t.Errorf("minutePartitionTime of %d's partition: %d, %v", ms, start, ok)
		}
	}
	if _, ok := minutePartitionTime("dt=2026-01-01"); ok {
		t.Error("a day's directory read as a partition")
	}
	for _, s := range []string{"plain", "a,b", `say "hi"`, "two\nlines", `"`, ""} {
		line := string(appendCSVField([]byte("1,"), s)) + ",x"
		f, err := splitCSV(line)
		if err != nil || len(f) != 3 || f[1] != s || f[2] != "x" {
			t.Errorf("%q as %q: %q, %v", s, line, f, err)
		}
	}
}

// TestQ10FilesIncomplete: reading a result with a part file in progress,
// or a partition not marked complete, fails.
func TestQ10FilesIncomplete(t *testing.T) {
	g, err := nexmark.New(testConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, damage := range []struct {
		name string
		fn   func(partition string) error
	}{
		{"an in-progress file left", func(p string) error {
			return os.WriteFile(filepath.Join(p, ".part-0_0-9-9.csv.inprogress"), nil, 0o644)
		}},
		{"a partition without its success file", func(p string) error {
			return os.Remove(filepath.Join(p, "_SUCCESS"))
		}},
	} {
		dir := t.TempDir()
		q := q10()
		runTo(t, q, g, 2000, dir)
		parts, _ := filepath.Glob(filepath.Join(dir, "dt=*", "hm=*"))
		if len(parts) == 0 {
			t.Fatal("no partition")
		}
		if err := damage.fn(parts[0]); err != nil {
			t.Fatal(err)
		}
		if err := q.Files(dir, func(_, _ []byte) {}); err == nil {
			t.Errorf("%s: read without an error", damage.name)
		}
	}
}
