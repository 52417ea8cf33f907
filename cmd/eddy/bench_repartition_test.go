package main

import (
	"strings"
	"testing"
)

// Bad `eddy bench repartition` arguments are reported before any broker
// starts, each naming what to pass instead.
func TestBenchRepartitionArgumentErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"repartition", "--purge", "sometimes"}, `--purge "sometimes": pass on, off or both`},
		{[]string{"repartition", "--rate", "0"}, "--rate, --partitions and --accounts must be at least 1"},
		{[]string{"repartition", "--purge-interval", "-1s"}, "--purge-interval positive"},
		{[]string{"repartition", "--sample", "0s"}, "--sample"},
	} {
		err := runBench(t.Context(), tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}
