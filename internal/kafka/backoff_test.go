package kafka

import (
	"testing"
	"time"
)

func TestRetryBackoff(t *testing.T) {
	for _, tc := range []struct {
		fails  int
		around time.Duration
	}{{0, 100 * time.Millisecond}, {1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {3, 400 * time.Millisecond}, {4, 800 * time.Millisecond}, {5, time.Second}, {50, time.Second}} {
		for range 100 {
			d := RetryBackoff(tc.fails)
			if lo, hi := tc.around*8/10, tc.around*12/10; d < lo || d > hi {
				t.Fatalf("RetryBackoff(%d) = %v, want within [%v, %v]", tc.fails, d, lo, hi)
			}
		}
	}
}
