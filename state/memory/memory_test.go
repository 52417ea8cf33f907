package memory_test

import (
	"fmt"
	"testing"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/memory"
	"github.com/eddy-streams/eddy/state/statetest"
)

func TestConformance(t *testing.T) {
	statetest.Run(t, func(t *testing.T) state.Backend { return memory.New() })
}

func TestDirs(t *testing.T) {
	b := memory.New()
	for _, dir := range []string{"/b", "/a/", "/a"} {
		db, err := b.Open(dir)
		if err != nil {
			t.Fatalf("Open(%s): %v", dir, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(b.Dirs()); got != "[/a /b]" {
		t.Fatalf("Dirs = %s; want [/a /b] (cleaned, sorted, no duplicates)", got)
	}
	if err := b.Destroy("/b"); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(b.Dirs()); got != "[/a]" {
		t.Fatalf("Dirs after Destroy = %s; want [/a]", got)
	}
}
