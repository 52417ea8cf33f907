package failpoint

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	s, err := Parse("")
	if err != nil || s != nil {
		t.Fatalf("empty: %v %v, want nil, nil", s, err)
	}
	s.Hit(CommitAfterEnd) // nil: a no-op

	s, err = Parse("commit.after-end@3, restore.mid")
	if err != nil {
		t.Fatal(err)
	}
	if s.armed[CommitAfterEnd].at != 3 || s.armed[RestoreMid].at != 1 || len(s.armed) != 2 {
		t.Fatalf("armed %+v", s.armed)
	}
	// Hits before the armed count, and of points not armed, do nothing.
	s.Hit(CommitAfterEnd)
	s.Hit(CommitAfterEnd)
	s.Hit(CommitBeforeEnd)

	for _, bad := range []string{"commit.nowhere", "commit.after-end@0", "commit.after-end@x"} {
		if _, err := Parse(bad); err == nil || !strings.Contains(err.Error(), Env) {
			t.Errorf("Parse(%q): %v, want an error naming %s", bad, err, Env)
		}
	}
}
