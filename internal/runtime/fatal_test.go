package runtime

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/state"
)

// fatalTask panics with a state.Fatal on its first record, as Pebble does
// when its write-ahead log cannot be written.
type fatalTask struct{}

func (fatalTask) Process(*kgo.Record) error { panic(state.Fatal{Msg: "wal write failed"}) }
func (fatalTask) Punctuate(time.Time) error { return nil }
func (fatalTask) Close() error              { return nil }

const fatalChildEnv = "EDDY_TEST_FATAL_CHILD"

// TestStateFatalCrashesTheProcess runs an app whose store fails fatally in
// a child process, and checks that the process crashed with the
// state.Fatal's panic, as state.Fatal promises, rather than returning an
// error that a caller could log and go on from.
func TestStateFatalCrashesTheProcess(t *testing.T) {
	if os.Getenv(fatalChildEnv) == "1" {
		fatalChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStateFatalCrashesTheProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), fatalChildEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child: %v, want a crash; output:\n%s", err, out.String())
	}
	// A panic that reaches the top of a goroutine exits with status 2 and
	// prints the value; a test that merely fails exits with status 1.
	if exit.ExitCode() != 2 || !strings.Contains(out.String(), "panic: ") || !strings.Contains(out.String(), "wal write failed") {
		t.Fatalf("child exited %d, want the state.Fatal's panic (status 2); output:\n%s", exit.ExitCode(), out.String())
	}
	if strings.Contains(out.String(), "Run returned") {
		t.Fatalf("Run returned instead of crashing; output:\n%s", out.String())
	}
}

// fatalChild runs the fatal topology until the process crashes; if Run
// returns instead, it says so and the parent fails.
func fatalChild(t *testing.T) {
	h := newHarness(t)
	h.produce(0, 1)
	topo := Topology{Subtopologies: []Subtopology{{
		Sources: []string{"in"},
		NewTask: func(TaskContext) (TaskProcessor, error) { return fatalTask{}, nil },
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := Run(ctx, h.config(t.TempDir(), io.Discard), topo)
	t.Logf("Run returned %v", err)
	os.Stdout.WriteString("Run returned\n")
}
