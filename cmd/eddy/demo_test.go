package main

import (
	"os"
	"path/filepath"
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

// The demo removes its temporary directory after a verified run, keeps it
// (and says where and how big) after a failed one, and never removes a
// --data-dir.
func TestFinishDataDir(t *testing.T) {
	for _, c := range []struct {
		name          string
		temporary, ok bool
		removed       bool
		want          []string
	}{
		{"temporary, verified", true, true, true, []string{"removed the data directory", "2.0 KiB", "--data-dir"}},
		{"temporary, failed", true, false, false, []string{"are in", "2.0 KiB", "rm -r"}},
		{"--data-dir, verified", false, true, false, []string{"are in", "2.0 KiB"}},
		{"--data-dir, failed", false, false, false, []string{"are in", "2.0 KiB"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "demo")
			if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "logs", "ledger.log"), make([]byte, 2048), 0o644); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			finishDataDir(&out, dir, c.temporary, c.ok)
			_, err := os.Stat(dir)
			if removed := os.IsNotExist(err); removed != c.removed {
				t.Errorf("removed %v, want %v", removed, c.removed)
			}
			for _, w := range append(c.want, dir) {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output %q lacks %q", out.String(), w)
				}
			}
			if !c.temporary && strings.Contains(out.String(), "rm -r") {
				t.Errorf("output %q suggests removing the user's --data-dir", out.String())
			}
		})
	}
}
