package runtime

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errEndBlocked is why an End was cancelled by groupBlock.
var errEndBlocked = errors.New("the consumer group stopped (a heartbeat failed) while the transaction was ending, and franz-go cannot end it before the rebalance the worker holds back; starting a new session")

// groupBlock cancels the end of a transaction that waits on a consumer
// group which cannot move until that end returns.
//
// Before it commits, franz-go's GroupTransactSession.End forces a heartbeat
// and waits for its answer, or for a revoke or a loss of the partitions.
// When the heartbeat loop has already stopped on an error (a connection
// reset or a broker that stopped answering, so that the coordinator may
// have dropped the member), no heartbeat answers: the group's manage loop
// would call OnPartitionsLost, which releases End, but with
// BlockRebalanceOnPoll it first waits for the worker's AllowRebalance, and
// the worker allows the rebalance only once End returned. Each waited for
// the other until End's context expired, TransactionTimeout + 30 s: the
// 20–56 s stalls of issue 15 after a reset or a blackhole of a few seconds.
//
// franz-go calls OnPartitionsCallbackBlocked when a rebalance waits for the
// worker. In a normal rebalance the heartbeat loop still runs and answers
// End's heartbeat within a round trip, so a block alone must not cancel
// End: an End still running grace after a block (and after it began) is
// cancelled, with errEndBlocked as the cause. The worker then does what it
// did after the 40 s: it closes the session, whose transaction the broker
// aborts, and starts a new one that restores its tasks from the changelog.
type groupBlock struct {
	grace time.Duration

	mu      sync.Mutex
	blocked bool                    // a rebalance waits for AllowRebalance
	cancel  context.CancelCauseFunc // the running End's; nil between Ends
	timer   *time.Timer             // armed to cancel the running End
}

// reset starts a session's watch: nothing is blocked in a new client.
func (g *groupBlock) reset(grace time.Duration) {
	g.mu.Lock()
	g.grace, g.blocked = grace, false
	g.mu.Unlock()
}

// onBlocked is called by the OnPartitionsCallbackBlocked callback, which
// franz-go runs in a goroutine of its own.
func (g *groupBlock) onBlocked() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.blocked = true
	g.arm()
}

// allowed is called with AllowRebalance: the rebalance goes on, and a later
// block is signalled again.
func (g *groupBlock) allowed() {
	g.mu.Lock()
	g.blocked = false
	g.mu.Unlock()
}

// watch returns the context for one End and the function to call when it
// returned.
func (g *groupBlock) watch(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	g.mu.Lock()
	g.cancel = cancel
	g.arm()
	g.mu.Unlock()
	return ctx, func() {
		g.mu.Lock()
		if g.timer != nil {
			g.timer.Stop()
		}
		g.cancel, g.timer = nil, nil
		g.mu.Unlock()
		cancel(nil)
	}
}

// arm starts the grace period when an End runs while a rebalance is
// blocked. The timer cancels the End it was armed for, never a later one.
func (g *groupBlock) arm() {
	if !g.blocked || g.cancel == nil || g.timer != nil {
		return
	}
	cancel := g.cancel
	g.timer = time.AfterFunc(g.grace, func() { cancel(errEndBlocked) })
}

// endErr names errEndBlocked when it is why End failed.
func endErr(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), errEndBlocked) {
		return errors.Join(errEndBlocked, err)
	}
	return err
}
