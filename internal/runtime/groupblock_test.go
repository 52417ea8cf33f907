package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-streams/eddy/internal/testutil"
)

func TestGroupBlockCancelsOnlyAnEndThatABlockHolds(t *testing.T) {
	var g groupBlock
	gen := g.reset(time.Millisecond)
	g.polled()
	cancelled := func(ctx context.Context) bool {
		t.Helper()
		select {
		case <-ctx.Done():
			return true
		case <-time.After(100 * time.Millisecond): // 100× the grace
			return false
		}
	}

	// No block: an End is never cancelled.
	ctx, stop := g.watch(context.Background())
	if cancelled(ctx) {
		t.Fatalf("an End without a block was cancelled: %v", context.Cause(ctx))
	}
	stop()

	// A block during an End, and no heartbeat since: cancelled, with
	// errEndBlocked as the cause.
	ctx, stop = g.watch(context.Background())
	g.onBlocked(gen)
	if !cancelled(ctx) || !errors.Is(context.Cause(ctx), errEndBlocked) {
		t.Fatalf("cause %v, want errEndBlocked", context.Cause(ctx))
	}
	stop()
	if err := endErr(ctx, context.Canceled); !errors.Is(err, errEndBlocked) || !errors.Is(err, context.Canceled) {
		t.Fatalf("endErr = %v, want both errEndBlocked and the End's own error", err)
	}

	// A block before an End, not yet allowed, cancels the End too.
	ctx, stop = g.watch(context.Background())
	if !cancelled(ctx) {
		t.Fatal("an End that began while a rebalance was blocked was not cancelled")
	}
	stop()

	// A heartbeat written since the block: the heartbeat loop is alive,
	// so the End (a normal rebalance's) goes on.
	g.onBlocked(gen)
	g.heartbeatWritten(gen)
	ctx, stop = g.watch(context.Background())
	if cancelled(ctx) {
		t.Fatalf("an End with a live heartbeat loop was cancelled: %v", context.Cause(ctx))
	}
	stop()

	// Once the rebalance was allowed, the next End is free again.
	g.onBlocked(gen)
	g.allowed()
	ctx, stop = g.watch(context.Background())
	if cancelled(ctx) {
		t.Fatalf("an End after AllowRebalance was cancelled: %v", context.Cause(ctx))
	}
	stop()
	if err := endErr(ctx, context.Canceled); errors.Is(err, errEndBlocked) {
		t.Fatalf("endErr blames the group for an End it did not cancel: %v", err)
	}

	// Stale signals: one that comes after AllowRebalance (the worker no
	// longer holds the poll), and one from the previous session's client.
	g.onBlocked(gen)
	old := gen
	gen = g.reset(time.Millisecond)
	g.polled()
	g.onBlocked(old)
	ctx, stop = g.watch(context.Background())
	if cancelled(ctx) {
		t.Fatalf("an End was cancelled by a stale signal: %v", context.Cause(ctx))
	}
	stop()

	// A long grace: an End that returns in time is not cancelled.
	g.reset(time.Hour)
	g.polled()
	g.onBlocked(g.gen)
	ctx, stop = g.watch(context.Background())
	stop()
	if context.Cause(ctx) != context.Canceled {
		t.Fatalf("a returned End's context: %v, cause %v", ctx.Err(), context.Cause(ctx))
	}
}

// TestEndNotHeldByAFailedHeartbeat fails the group's heartbeat while a
// record is being processed, so that franz-go's group loop waits for the
// worker's AllowRebalance before it calls OnPartitionsLost, while the
// worker's End waits for a heartbeat that loop will never send. Before
// groupBlock the app stood still until End's context expired
// (TransactionTimeout + 30 s, here longer than waitOutputs waits); now the
// End is cancelled, the session restarts, and every record is counted
// exactly once.
func TestEndNotHeldByAFailedHeartbeat(t *testing.T) {
	h := newHarness(t)
	var log testutil.LogBuffer
	cfg := h.config(t.TempDir(), &log)
	cfg.TransactionTimeout = 2 * time.Minute

	var once sync.Once
	var fault *kfake.FaultHandle
	topo := counting()
	newTask := topo.Subtopologies[0].NewTask
	topo.Subtopologies[0].NewTask = func(tc TaskContext) (TaskProcessor, error) {
		p, err := newTask(tc)
		if err != nil {
			return nil, err
		}
		return processFunc{p, func() {
			once.Do(func() {
				// The next heartbeat fails as if the coordinator had
				// dropped the member; the record's processing holds the
				// poll until it did.
				fault = h.broker.Cluster().Fault(kfake.Fault{
					Keys: []kmsg.Key{kmsg.Heartbeat}, Err: kerr.UnknownMemberID, TopLevel: true,
				})
				deadline := time.Now().Add(30 * time.Second)
				for fault.Hits() == 0 && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
			})
		}}, nil
	}
	stop := h.runTopo(cfg, topo)
	h.produce(0, 50)
	outs := h.waitOutputs(50)
	stop()
	if fault == nil || fault.Hits() == 0 {
		t.Fatal("the heartbeat fault never fired")
	}
	if e := check(outs, 50); !e.ok() {
		t.Fatalf("after the failed heartbeat: %+v", e)
	}
	if !strings.Contains(log.String(), "the consumer group stopped") {
		t.Fatalf("the End was not cancelled for the blocked group:\n%s", log.String())
	}
}

// processFunc runs before before each record a TaskProcessor processes.
type processFunc struct {
	TaskProcessor
	before func()
}

func (p processFunc) Process(r *kgo.Record) error {
	p.before()
	return p.TaskProcessor.Process(r)
}
