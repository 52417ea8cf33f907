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
	if s.armed[CommitAfterEnd].at != 3 || s.armed[RestoreMid].at != 1 || len(s.armed) != 2 ||
		s.armed[CommitAfterEnd].stop || s.armed[RestoreMid].stop {
		t.Fatalf("armed %+v", s.armed)
	}
	// Hits before the armed count, and of points not armed, do nothing.
	s.Hit(CommitAfterEnd)
	s.Hit(CommitAfterEnd)
	s.Hit(CommitBeforeEnd)

	s, err = Parse("commit.before-end@2:stop,restore.mid:stop")
	if err != nil {
		t.Fatal(err)
	}
	if p := s.armed[CommitBeforeEnd]; p.at != 2 || !p.stop {
		t.Fatalf("commit.before-end@2:stop armed as %+v", p)
	}
	if p := s.armed[RestoreMid]; p.at != 1 || !p.stop {
		t.Fatalf("restore.mid:stop armed as %+v", p)
	}

	for _, bad := range []string{"commit.nowhere", "commit.after-end@0", "commit.after-end@x", "commit.after-end:pause", "commit.after-end:stop@2"} {
		if _, err := Parse(bad); err == nil || !strings.Contains(err.Error(), Env) {
			t.Errorf("Parse(%q): %v, want an error naming %s", bad, err, Env)
		}
	}
}
