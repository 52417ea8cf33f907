package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Event is one injected fault.
type Event struct {
	Kind, Detail string
	// Start and End bound the injection; recovery is measured from End.
	Start, End time.Time
	// Recovery is the time from End until every app committed offsets
	// past every payment written before End and every balances partition
	// holds a committed record written after End; AppRecovery is each
	// app's part of it, by app id. Unrecovered is set when that took over
	// recoveryCap.
	Recovery    time.Duration
	AppRecovery map[string]time.Duration
	Unrecovered bool
}

func (e Event) recoveryString() string {
	if e.Unrecovered {
		return fmt.Sprintf("NOT within %v", recoveryCap)
	}
	apps := make([]string, 0, len(e.AppRecovery))
	for _, g := range slices.Sorted(maps.Keys(e.AppRecovery)) {
		apps = append(apps, fmt.Sprintf("%s %.1fs", g, e.AppRecovery[g].Seconds()))
	}
	return fmt.Sprintf("%.1fs (%s)", e.Recovery.Seconds(), strings.Join(apps, ", "))
}

// between returns a duration uniformly in [lo, hi).
func (h *harness) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(h.rng.Int64N(int64(hi-lo)))
}

func (h *harness) pickApp() *app { return h.apps[h.rng.IntN(len(h.apps))] }

// inject injects one fault of kind and returns once it has ended.
func (h *harness) inject(ctx context.Context, kind string) (Event, error) {
	ev := Event{Kind: kind, Start: time.Now()}
	var err error
	switch kind {
	case KindKill:
		a := h.pickApp()
		ev.Detail = "SIGKILL " + a.name
		err = a.kill()
	case KindStop:
		err = h.freeze(ctx, &ev)
	case KindBrokerTerm:
		ev.Detail = "SIGTERM broker, restart"
		if err = h.broker.child.Stop(30 * time.Second); err == nil {
			err = h.broker.start()
		}
	case KindBrokerKill:
		ev.Detail = "SIGKILL broker, restart"
		h.broker.child.Kill()
		h.rep.BrokerKills++
		err = h.broker.start()
	case KindBrokerErrors:
		err = h.brokerErrors(ctx, &ev)
	case KindDisk:
		err = h.disk(ctx, &ev)
	case KindNetwork:
		err = h.network(ctx, &ev)
	default:
		err = fmt.Errorf("unknown fault kind %q", kind)
	}
	ev.End = time.Now()
	return ev, err
}

// freeze SIGSTOPs an app past the session timeout (its group moves its
// tasks to the others: it is a zombie) and thaws it.
func (h *harness) freeze(ctx context.Context, ev *Event) error {
	a := h.pickApp()
	d := h.opts.SessionTimeout + h.between(2*time.Second, 6*time.Second)
	ev.Detail = fmt.Sprintf("SIGSTOP %s for %.0fs", a.name, d.Seconds())
	if err := a.child.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	a.stopped = true
	err := h.supervise(ctx, d)
	if cerr := a.child.Signal(syscall.SIGCONT); err == nil {
		err = cerr
	}
	a.stopped = false
	return err
}

// brokerError is one request kind and the errors the broker may answer it
// with.
type brokerError struct {
	key      string
	errs     []*kerr.Error
	topLevel bool
}

// brokerErrors are the faults of the issue: timeouts, NOT_COORDINATOR,
// CONCURRENT_TRANSACTIONS on the transactional requests, and answers that
// come after the write was applied (kfake applies Produce before
// REQUEST_TIMED_OUT and NOT_ENOUGH_REPLICAS_AFTER_APPEND, TxnOffsetCommit
// before REQUEST_TIMED_OUT; EndTxn's are spoiled by the proxy).
var brokerErrors = []brokerError{
	{"EndTxn", []*kerr.Error{kerr.NotCoordinator, kerr.ConcurrentTransactions, kerr.CoordinatorLoadInProgress, kerr.RequestTimedOut}, true},
	{"TxnOffsetCommit", []*kerr.Error{kerr.NotCoordinator, kerr.CoordinatorLoadInProgress, kerr.RequestTimedOut}, false},
	{"Produce", []*kerr.Error{kerr.NotLeaderForPartition, kerr.RequestTimedOut, kerr.NotEnoughReplicasAfterAppend, kerr.NotEnoughReplicas}, false},
	{"Fetch", []*kerr.Error{kerr.NotLeaderForPartition, kerr.UnknownLeaderEpoch, kerr.KafkaStorageError}, false},
	{"InitProducerID", []*kerr.Error{kerr.NotCoordinator, kerr.ConcurrentTransactions, kerr.CoordinatorLoadInProgress}, true},
}

func (h *harness) brokerErrors(ctx context.Context, ev *Event) error {
	// One choice in six: the broker commits or aborts, and the client
	// hears an error or nothing (the proxy spoils the EndTxn answer).
	if h.rng.IntN(len(brokerErrors)+1) == len(brokerErrors) {
		codes := []int16{0, kerr.RequestTimedOut.Code, kerr.NotCoordinator.Code}
		names := []string{"connection reset", "REQUEST_TIMED_OUT", "NOT_COORDINATOR"}
		i := h.rng.IntN(len(codes))
		n := 1 + h.rng.IntN(3)
		before := h.proxy.Spoiled()
		h.proxy.SpoilEndTxnAnswers(n, codes[i])
		deadline := time.Now().Add(15 * time.Second)
		for h.proxy.PendingSpoils() > 0 && time.Now().Before(deadline) {
			if err := h.supervise(ctx, 100*time.Millisecond); err != nil {
				return err
			}
		}
		h.proxy.SpoilEndTxnAnswers(0, 0)
		hits := h.proxy.Spoiled() - before
		ev.Detail = fmt.Sprintf("EndTxn applied, answered %s x%d/%d", names[i], hits, n)
		h.rep.BrokerErrorHits += int(hits)
		return nil
	}
	be := brokerErrors[h.rng.IntN(len(brokerErrors))]
	e := be.errs[h.rng.IntN(len(be.errs))]
	n := 1 + h.rng.IntN(5)
	id, err := InstallFault(ctx, h.broker.faultAPI, BrokerFault{Key: be.key, Error: e.Message, Count: n, TopLevel: be.topLevel})
	if err != nil {
		return err
	}
	if be.key == "InitProducerID" {
		// Producers initialize when they start: restart one.
		a := h.pickApp()
		if err := a.kill(); err != nil {
			return err
		}
		ev.Detail = "restart " + a.name + ", "
	}
	deadline := time.Now().Add(15 * time.Second)
	hits := 0
	for {
		if hits, err = FaultHits(ctx, h.broker.faultAPI, id); err != nil {
			return err
		}
		if hits >= n || time.Now().After(deadline) {
			break
		}
		if err := h.supervise(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	if err := RemoveFault(ctx, h.broker.faultAPI, id); err != nil {
		return err
	}
	ev.Detail += fmt.Sprintf("%s %s x%d/%d", be.key, e.Message, hits, n)
	h.rep.BrokerErrorHits += hits
	return nil
}

// disk makes one app's state disk slow, full or failing for a few seconds.
func (h *harness) disk(ctx context.Context, ev *Event) error {
	a := h.pickApp()
	var mode string
	switch h.rng.IntN(3) {
	case 0:
		mode = fmt.Sprintf("latency %dms", 5+h.rng.IntN(60))
	case 1:
		mode = fmt.Sprintf("eio %.2f", 0.01+0.2*h.rng.Float64())
	default:
		mode = fmt.Sprintf("enospc %.2f", 0.01+0.2*h.rng.Float64())
	}
	d := h.between(3*time.Second, 10*time.Second)
	ev.Detail = fmt.Sprintf("%s: %s for %.0fs", a.name, mode, d.Seconds())
	if err := a.setDisk(mode); err != nil {
		return err
	}
	err := h.supervise(ctx, d)
	if derr := a.setDisk("off"); err == nil {
		err = derr
	}
	return err
}

// network cuts the apps from the broker at the proxy: every connection
// reset (and new ones refused for a while), or a blackhole in which nothing
// passes and nothing is closed.
func (h *harness) network(ctx context.Context, ev *Event) error {
	if h.rng.IntN(2) == 0 {
		d := h.between(0, 5*time.Second)
		ev.Detail = fmt.Sprintf("reset all, refuse for %.1fs", d.Seconds())
		h.proxy.Refuse(true)
		h.proxy.Reset()
		err := h.supervise(ctx, d)
		h.proxy.Refuse(false)
		return err
	}
	// Up to past the session timeout: the group evicts everyone.
	d := h.between(2*time.Second, h.opts.SessionTimeout+5*time.Second)
	ev.Detail = fmt.Sprintf("blackhole for %.1fs", d.Seconds())
	h.proxy.Blackhole(true)
	err := h.supervise(ctx, d)
	h.proxy.Blackhole(false)
	return err
}
