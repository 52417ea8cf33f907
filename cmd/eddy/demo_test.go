package main

import (
	"strings"
	"testing"
)

// Bad demo flags are reported together, each naming the flag, before
// anything starts.
func TestDemoFlagErrors(t *testing.T) {
	err := runDemo(t.Context(), []string{"--rate", "0", "--accounts", "-1", "--duration", "0s", "--crash-every", "-1s",
		"--window", "1500us", "--grace", "0s", "extra"})
	if err == nil {
		t.Fatal("runDemo accepted bad flags")
	}
	for _, want := range []string{"--rate 0", "--accounts -1", "--duration 0s", "--crash-every -1s",
		"--window 1.5ms", "whole number of milliseconds", "--grace 0s", `unexpected argument "extra"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
