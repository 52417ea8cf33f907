package main

import (
	"strings"
	"testing"
)

// Bad bench arguments are reported before any broker starts, each naming
// what to pass instead.
func TestBenchArgumentErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"usage: eddy bench ledger|windowed|window-state|restore|failover"}},
		{[]string{"restore", "--keys", "0"}, []string{"--keys, --partitions and --rounds must be at least 1"}},
		{[]string{"failover", "--instances", "1", "--standby-replicas", "0", "--before", "0s"},
			[]string{"--instances 1: a failover needs at least 2", "--standby-replicas 0", "--before must be positive"}},
		{[]string{"ledgr"}, []string{`unknown benchmark "ledgr"`, "usage:"}},
		{[]string{"nexmark", "--query", "q99"}, []string{`--query "q99": no such query`, "q0"}},
		{[]string{"nexmark", "--events", "0"}, []string{"--events must be at least 1"}},
		{[]string{"nexmark", "--source", "pulsar"}, []string{`--source "pulsar": want generator or kafka`}},
		{[]string{"nexmark", "--event-rate", "-5"}, []string{"--event-rate -5"}},
		{[]string{"nexmark", "--workers", "0"}, []string{"--workers 0: want at least 1"}},
		{[]string{"nexmark", "--source", "kafka", "--workers", "2"}, []string{"--workers is for --source generator"}},
		{[]string{"nexmark", "--query", "generator", "--workers", "2"}, []string{"--workers is for the queries"}},
		{[]string{"nexmark", "--query", "q0,q7", "--cpuprofile", "x"}, []string{"--cpuprofile profiles one query"}},
		{[]string{"nexmark", "--query", "q2", "--events", "10", "--results", "/dev/null/x"}, []string{"--results"}},
		{[]string{"state-memory", "--state-memory", "1000"}, []string{"--state-memory 1000: must be at least"}},
		{[]string{"state-memory", "--keys", "-1"}, []string{"--keys, --records and --partitions must be at least 1"}},
		{[]string{"windowed", "--window", "0s"}, []string{"--window must be a whole number of milliseconds"}},
		{[]string{"window-state", "--window", "1500us", "--grace", "-1s", "--retentions", "3", "--records", "0"},
			[]string{"--window 1.5ms", "--grace -1s", "--retentions 3", "--records"}},
	} {
		err := runBench(t.Context(), tc.args)
		if err == nil {
			t.Errorf("%q: no error", tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q lacks %q", tc.args, err, w)
			}
		}
	}
}

// `eddy nexmark generate` names the flag to fix.
func TestNexmarkGenerateErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage: eddy nexmark generate"},
		{[]string{"generate"}, "--out is required"},
		{[]string{"generate", "--out", t.TempDir(), "--format", "parquet"}, `--format "parquet": want jsonl or csv`},
		{[]string{"generate", "--out", t.TempDir(), "--events", "0"}, "--events must be at least 1"},
	} {
		err := runNexmarkCommand(t.Context(), tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}
