// Package failpoint crashes the process at named points of the commit
// cycle, the checkpoint upload and the restore, for crash tests (issue 6:
// a crash at each step, one by one, with the verifier after each).
//
// Failpoints are off unless the environment variable EDDY_FAILPOINTS names
// some: "commit.after-end" crashes the first time that point is reached,
// "commit.after-end@3" the third time; several are separated by commas. A
// crash is a SIGKILL the process sends itself, after one line on stderr,
// so nothing (deferred calls, buffered writes, a clean Close) runs that a
// real crash would not run. A Set is nil when off: Hit on nil is a no-op,
// so a production run pays one nil check per commit step.
//
// A point suffixed ":stop" ("commit.before-end@3:stop") freezes the
// process there instead: it sends itself SIGSTOP, and carries on from that
// point when a SIGCONT comes. A zombie test freezes an instance in a chosen
// window of the commit cycle this way (holding a prepared sink
// transaction, say) rather than wherever a SIGSTOP from outside lands.
package failpoint

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// Env is the environment variable that enables failpoints.
const Env = "EDDY_FAILPOINTS"

// The points, in the order a transaction reaches them (docs/design.md §3).
const (
	// CommitBeforeChangelog: the transaction's outputs are produced, its
	// changelog records not yet (step 2 starts).
	CommitBeforeChangelog = "commit.before-changelog"
	// CommitBeforeEnd: changelog and outputs produced and flushed; the
	// transaction is not committed yet (before step 3).
	CommitBeforeEnd = "commit.before-end"
	// CommitAfterEnd: the transaction committed, no task's database has
	// applied it yet (between steps 3 and 4).
	CommitAfterEnd = "commit.after-end"
	// CommitMidApply: the first task's database applied the transaction,
	// the others not yet (step 4, half done).
	CommitMidApply = "commit.mid-apply"
	// CommitAfterApply: every database applied it (step 4 done).
	CommitAfterApply = "commit.after-apply"
	// CheckpointBeforeManifest: a checkpoint's files are uploaded, its
	// manifest not yet.
	CheckpointBeforeManifest = "checkpoint.before-manifest"
	// CheckpointAfterManifest: the manifest is uploaded, old checkpoints
	// not yet collected.
	CheckpointAfterManifest = "checkpoint.after-manifest"
	// RestoreMid: a restore applied its first batch of changelog records,
	// not the rest.
	RestoreMid = "restore.mid"
)

// Points lists every failpoint.
var Points = []string{CommitBeforeChangelog, CommitBeforeEnd, CommitAfterEnd, CommitMidApply, CommitAfterApply,
	CheckpointBeforeManifest, CheckpointAfterManifest, RestoreMid}

// Set is the armed failpoints of a process.
type Set struct {
	armed map[string]*point
}

type point struct {
	at   int64 // crash (or stop) on this hit
	stop bool  // SIGSTOP instead of SIGKILL
	hits atomic.Int64
}

// stopSuffix, after a point, makes it freeze the process instead of
// crashing it.
const stopSuffix = ":stop"

// FromEnv returns the failpoints EDDY_FAILPOINTS arms, nil when it is
// unset or empty, or an error naming an unknown point or a bad count.
func FromEnv() (*Set, error) { return Parse(os.Getenv(Env)) }

// Parse parses a failpoint list in EDDY_FAILPOINTS's format.
func Parse(spec string) (*Set, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	s := &Set{armed: map[string]*point{}}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		p := &point{at: 1}
		item, p.stop = strings.CutSuffix(item, stopSuffix)
		name, count, hasCount := strings.Cut(item, "@")
		if !slices.Contains(Points, name) {
			return nil, fmt.Errorf("%s: unknown failpoint %q; the points are %s (each may end in @N, the N-th time, and %s, to freeze instead of crash)", Env, name, strings.Join(Points, ", "), stopSuffix)
		}
		if hasCount {
			n, err := strconv.ParseInt(count, 10, 64)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("%s: %q: the count after @ must be 1 or more", Env, item)
			}
			p.at = n
		}
		s.armed[name] = p
	}
	return s, nil
}

// Hit crashes the process if name is armed and this is the hit it waits
// for, or, armed with ":stop", freezes it and returns once it is
// continued. It is safe for concurrent use.
func (s *Set) Hit(name string) {
	if s == nil {
		return
	}
	p := s.armed[name]
	if p == nil || p.hits.Add(1) != p.at {
		return
	}
	if p.stop {
		fmt.Fprintf(os.Stderr, "failpoint %s: stopping (SIGSTOP); SIGCONT resumes\n", name)
		stopSelf()
		fmt.Fprintf(os.Stderr, "failpoint %s: continued\n", name)
		return
	}
	fmt.Fprintf(os.Stderr, "failpoint %s: crashing (SIGKILL)\n", name)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is delivered asynchronously: go no further
}
