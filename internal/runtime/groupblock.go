package runtime

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errEndBlocked is why an End was cancelled by groupBlock.
var errEndBlocked = errors.New("the consumer group stopped (a heartbeat failed) while the transaction was ending, and franz-go cannot end it before the rebalance the worker holds back; starting a new session")

// groupBlock cancels the end of a transaction that waits on a consumer
// group which cannot move until that end returns.
//
// Before it commits offsets, franz-go's GroupTransactSession.End forces a
// heartbeat and waits for its answer, or for a revoke or a loss of the
// partitions. When the heartbeat loop has already stopped on an error (a
// connection reset or a broker that stopped answering, so that the
// coordinator may have dropped the member), no heartbeat answers: the
// group's manage loop would call OnPartitionsLost, which releases End, but
// with BlockRebalanceOnPoll it first waits for the worker's
// AllowRebalance, and the worker allows the rebalance only once End
// returned. Each waited for the other until End's context expired,
// TransactionTimeout + 30 s: the 20–56 s stalls of issue 15 after a reset
// or a blackhole of a few seconds.
//
// franz-go calls OnPartitionsCallbackBlocked when a rebalance waits for the
// worker. In a normal rebalance the heartbeat loop goes on (it heartbeats
// while the revoke waits, and answers End's forced heartbeat), so a block
// alone proves nothing: grace after the latest block, a commit's End that
// is still running is cancelled, with errEndBlocked as the cause, only if
// no heartbeat request went out since that block. The worker then does
// what it did after the 40 s: it closes the session, whose transaction the
// broker aborts, and starts a new one that restores its tasks from the
// changelog. Signals from an earlier session's client, or that arrive
// after the worker let the rebalance go on, are ignored.
type groupBlock struct {
	grace time.Duration

	mu sync.Mutex
	// gen counts sessions: a signal of an older client is stale.
	gen int
	// holding is set while the worker holds the poll (from PollRecords
	// to AllowRebalance): only then can a rebalance wait for it.
	holding bool
	// blockedAt is when a rebalance last said it waits (zero: none since
	// the last AllowRebalance); heartbeatAt when a Heartbeat request was
	// last written.
	blockedAt, heartbeatAt time.Time
	cancel                 context.CancelCauseFunc // the running End's; nil between Ends
	timer                  *time.Timer             // armed for the running End
}

// reset starts a session's watch and returns its generation, which the
// session's callbacks pass back.
func (g *groupBlock) reset(grace time.Duration) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gen++
	g.grace, g.holding, g.blockedAt = grace, false, time.Time{}
	return g.gen
}

// polled is called when PollRecords returned: the worker holds the poll.
func (g *groupBlock) polled() {
	g.mu.Lock()
	g.holding = true
	g.mu.Unlock()
}

// onBlocked is called by the OnPartitionsCallbackBlocked callback of
// session gen, which franz-go runs in a goroutine of its own.
func (g *groupBlock) onBlocked(gen int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gen != g.gen || !g.holding {
		return // a closed client's, or the rebalance already went on
	}
	g.blockedAt = time.Now()
	g.arm()
}

// heartbeatWritten is called when session gen wrote a Heartbeat request:
// its heartbeat loop is alive.
func (g *groupBlock) heartbeatWritten(gen int) {
	g.mu.Lock()
	if gen == g.gen {
		g.heartbeatAt = time.Now()
	}
	g.mu.Unlock()
}

// allowed is called with AllowRebalance: the rebalance goes on.
func (g *groupBlock) allowed() {
	g.mu.Lock()
	g.holding, g.blockedAt = false, time.Time{}
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
// blocked. The timer checks the End it was armed for, never a later one:
// it cancels it if no heartbeat went out since the latest block, and
// otherwise lets a later block arm it again.
func (g *groupBlock) arm() {
	if g.blockedAt.IsZero() || g.cancel == nil || g.timer != nil {
		return
	}
	cancel := g.cancel
	var t *time.Timer
	// The grace counts from the block: an End that begins when the
	// heartbeat loop has been silent for longer is checked at once.
	wait := max(g.grace-time.Since(g.blockedAt), 0)
	// t is read under g.mu, which arm's caller holds until t is set.
	t = time.AfterFunc(wait, func() {
		g.mu.Lock()
		alive := !g.heartbeatAt.Before(g.blockedAt)
		if alive && g.timer == t {
			g.timer = nil
		}
		g.mu.Unlock()
		if !alive {
			cancel(errEndBlocked)
		}
	})
	g.timer = t
}

// heartbeatHook tells groupBlock when its session writes a heartbeat.
type heartbeatHook struct {
	g   *groupBlock
	gen int
}

func (h heartbeatHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.Heartbeat.Int16() && err == nil {
		h.g.heartbeatWritten(h.gen)
	}
}

// endErr names errEndBlocked when it is why End failed.
func endErr(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), errEndBlocked) {
		return errors.Join(errEndBlocked, err)
	}
	return err
}
