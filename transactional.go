package eddy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/runtime"
	"github.com/eddy-streams/eddy/state"
)

// TransactionalSink is a system outside Kafka (a database) that a
// stream's records are written to exactly once, in step with the task's
// Kafka transaction: a two-phase commit, as Flink's
// TwoPhaseCommitSinkFunction and its XA JDBC sink do it (docs/design.md
// §3.7). Each task has its own sink, which the runtime drives:
//
//   - Write adds records to the sink's open transaction;
//   - Prepare, when the Kafka transaction is about to commit, makes them
//     durable but invisible (PostgreSQL's PREPARE TRANSACTION) and returns
//     a token naming that transaction, which eddy writes in the task's
//     state, so in its changelog, inside the Kafka transaction;
//   - Commit, once the Kafka transaction committed, makes them visible;
//     Abort drops them when it aborted;
//   - Recover, when the task opens anywhere (after a crash, on another
//     instance), gets the token of the last transaction the changelog
//     holds as committed: what that token names is committed, every other
//     prepared transaction of the task aborted.
//
// So the external writes commit if and only if the Kafka transaction
// does, whatever crashes in between. A sink must also fence the task's
// earlier owners (a zombie still writing): Recover raises an epoch in the
// external system that every later Prepare checks.
type TransactionalSink[K, V any] interface {
	// Recover is called once, when the task opens, before any record:
	// committed is the token of the last prepared transaction whose
	// Kafka transaction committed (nil: none yet). It commits that
	// transaction if it is still prepared, aborts the task's other
	// prepared transactions, and fences earlier owners of the task.
	Recover(committed []byte) error
	// Write adds a record to the open transaction (beginning one if
	// none is open).
	Write(r Record[K, V]) error
	// Prepare ends the open transaction's first phase: its writes are
	// durable but not visible. It returns the transaction's token, or nil
	// if it wrote nothing (then no Commit follows), and the writes the
	// external system refused (a row that breaks a constraint of the
	// table), which are not in the prepared transaction: the
	// produce-error policy (Config.OnProduceError) meets the input record
	// that made them, once per input record, inside the same Kafka
	// transaction (a dead letter, a skip, or a failure that aborts it); a
	// punctuator's write has none, and is skipped under LogAndContinue
	// or fails the transaction. An error aborts the Kafka transaction;
	// one that wraps ErrSinkFenced ends the session.
	Prepare() (token []byte, refused []Refusal, err error)
	// Commit makes the prepared transaction of token visible. An error
	// ends the session; the task's next Recover commits it.
	Commit(token []byte) error
	// Abort drops the open transaction and, if token is not nil, the
	// prepared one it names: the Kafka transaction aborted, and its
	// records will be processed again. After an error the sink takes no
	// more records (the app stops); the task's next Recover aborts it.
	// When whether the Kafka transaction committed is unknown (its end
	// failed), Abort is not called for the prepared transaction: the
	// next Recover decides from the changelog.
	Abort(token []byte) error
	// Close releases the sink when the task closes; what is prepared
	// stays for the next Recover.
	Close() error
}

// StreamTimeSink is a TransactionalSink that acts on its task's stream
// time, as a file sink marks the partitions that stream time has closed
// (package filesink). Before each Prepare, eddy calls PrepareAt with the
// task's stream time (state.NoStreamTime, math.MinInt64, before the
// first record; EndOfInputTime once a bounded input ended), so that what
// the sink derives from it is prepared, and committed, with the
// transaction that reached that time: the sink's Prepare may return a
// token for it even when no record was written since the last one.
type StreamTimeSink interface {
	PrepareAt(streamTime int64)
}

// ErrSinkUnavailable is wrapped by the errors of a TransactionalSink whose
// system is unreachable, refuses the sink's credentials, or cannot take
// the sink's transaction (a database down, a lost connection): not the
// record's fault. Such an error aborts the transaction and stops the app,
// which processes the records again once restarted; no error policy
// skips or dead-letters a record for it. Any other error of Write is the
// record's (a value that does not map to the table): the produce-error
// policy (Config.OnProduceError) decides.
var ErrSinkUnavailable = errors.New("eddy: sink unavailable")

// ErrSinkFenced is wrapped by the errors of a TransactionalSink that found
// a newer owner of its task (its epoch raised by another instance's
// Recover): this instance lost the task, frozen or cut off past its
// session timeout, and is a zombie. The Kafka transaction aborts and the
// session ends, as when Kafka fences a producer; the instance rejoins the
// group and recovers whichever tasks it is given. The app does not stop.
var ErrSinkFenced = fmt.Errorf("eddy: sink fenced: %w", runtime.ErrTaskFenced)

// Refusal is a write that a TransactionalSink's system refused when
// Prepare sent it: Write is its index among the Writes that returned nil
// since the last Prepare or Abort (from 0), Err the system's reason.
type Refusal struct {
	Write int
	Err   error
}

// SinkTask identifies the task a TransactionalSink serves: its prepared
// transactions and its fencing epoch are the task's, named by the app id,
// the sink's name and the task id ("0_3": sub-topology 0, partition 3),
// which stay the same wherever and whenever the task runs. The app id and
// the sink's name are Kafka names (they name the sink's changelog topic):
// letters, digits, '.', '_' and '-'.
type SinkTask struct {
	AppID string
	// Sink is the name given to ToTransactional: a task may have
	// several sinks, each with its own transactions and epoch.
	Sink string
	Task string
}

// ToTransactional writes s to a TransactionalSink, one per task, which
// open creates when the task opens. name names the operator and the
// store that keeps the sink's last prepared token (its changelog is what
// recovery reads). The pgsink package's sink is one.
func ToTransactional[K, V any](s Stream[K, V], name string, open func(task SinkTask) (TransactionalSink[K, V], error)) {
	topo := s.t
	switch {
	case name == "":
		topo.failOn("ToTransactional", s.n, "name the sink: its store keeps the tokens of its transactions")
		return
	case strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "":
		topo.failOn("ToTransactional", s.n, "sink %q: use letters, digits, '.', '_' and '-' only: the name is part of its changelog topic's and of the sink's transaction ids", name)
		return
	case open == nil:
		topo.failOn("ToTransactional", s.n, "sink %q: pass the function that opens the sink of a task", name)
		return
	}
	n := topo.add("transactional-"+name, s.n)
	topo.addStore(name, n, 0, nil)
	n.build = func(b *taskBuild) error {
		buf, err := b.tc.Store(name)
		if err != nil {
			return err
		}
		sink, err := open(SinkTask{AppID: b.cfg.AppID, Sink: name, Task: b.tc.ID().String()})
		if err != nil {
			return fmt.Errorf("sink %q: open: %w", name, err)
		}
		b.closers = append(b.closers, sink.Close)
		committed, _, err := buf.Get(committedTokenKey)
		if err != nil {
			return fmt.Errorf("sink %q: read the committed token: %w", name, err)
		}
		if err := sink.Recover(committed); err != nil {
			return fmt.Errorf("sink %q: recover: %w", name, err)
		}
		p := &twoPhase{name: name, buf: buf, sink: sink, refuse: b.recordFailed, refusePunctuated: b.punctuatedFailed}
		if at, ok := sink.(StreamTimeSink); ok {
			p.prepareAt = at.PrepareAt
			p.streamTime = b.tc.StreamTime
		}
		in := output[K, V](b, s.n)
		in.children = append(in.children, receiverFunc[K, V](func(r Record[K, V]) error {
			if p.broken != nil {
				return p.broken
			}
			p.open = true
			if err := sink.Write(r); err != nil {
				if errors.Is(err, ErrSinkUnavailable) || errors.Is(err, ErrSinkFenced) {
					return fmt.Errorf("sink %q: %w", name, err)
				}
				return &sinkRefusal{fmt.Errorf("sink %q refused the record: %w", name, err)}
			}
			// The input record behind the write, for the policy if
			// Prepare finds the write refused.
			p.inputs = append(p.inputs, p.input(b.current, b.currentHeld))
			return nil
		}))
		b.transactional = append(b.transactional, p)
		return nil
	}
}

// committedTokenKey is the key of the sink's store that holds the token
// of its last prepared transaction: written in the Kafka transaction, it
// is committed exactly when that transaction is.
var committedTokenKey = []byte("token")

// twoPhase is a task's TransactionalSink as the commit cycle drives it
// (the sink's types erased).
type twoPhase struct {
	name string
	buf  *state.StoreBuffer
	sink interface {
		Prepare() ([]byte, []Refusal, error)
		Commit(token []byte) error
		Abort(token []byte) error
	}
	// refuse applies the produce-error policy to the input record of a
	// refused write (taskBuild.recordFailed).
	refuse func(input *kgo.Record, err error) error
	// refusePunctuated applies it to a punctuator's refused write
	// (taskBuild.punctuatedFailed).
	refusePunctuated func(err error) error
	// prepareAt, for a StreamTimeSink, is told streamTime's value
	// before each prepare.
	prepareAt  func(streamTime int64)
	streamTime func() int64
	// open is set when a record was written since the last prepare or
	// abort; inputs holds, per write since then, its input record, a
	// copy kept in kept; pending is the token of the transaction prepared
	// for the Kafka transaction being committed.
	open    bool
	inputs  []sinkInput
	kept    keptRecords
	pending []byte
	// broken is an Abort's failure: the external system may still hold
	// the prepared transaction (and its locks), so the task writes no
	// more until it is opened again and Recover resolves it.
	broken error
}

// prepare is the first phase, once per commit (runtime.TaskCommitter).
func (p *twoPhase) prepare() error {
	if p.broken != nil {
		return p.broken
	}
	if p.pending != nil {
		// Never two prepared transactions per Kafka transaction: only
		// the last token would reach the changelog.
		return fmt.Errorf("eddy: sink %q: prepared twice in one transaction", p.name)
	}
	if p.prepareAt != nil {
		p.prepareAt(p.streamTime())
	}
	token, refused, err := p.sink.Prepare()
	if err != nil {
		// The open transaction stays open: the Kafka transaction
		// aborts, and Discard drops it.
		return fmt.Errorf("eddy: sink %q: prepare: %w", p.name, err)
	}
	p.open = false
	if token != nil {
		p.buf.Put(committedTokenKey, token)
		p.pending = token // aborted with the Kafka transaction if a refusal fails it
	}
	inputs := p.inputs
	defer p.forget()
	var met map[int]bool // input records the policy met, by kept index
	for _, r := range refused {
		if r.Write < 0 || r.Write >= len(inputs) {
			return fmt.Errorf("eddy: sink %q: prepare refused write %d, but only %d were written since the last prepare (a bug of the sink)", p.name, r.Write, len(inputs))
		}
		in := inputs[r.Write]
		if in.kept >= 0 {
			if met[in.kept] {
				continue // another write of the same input record
			}
			if met == nil {
				met = map[int]bool{}
			}
			met[in.kept] = true
		}
		if err := p.refuseWrite(in, r.Err); err != nil {
			return err
		}
	}
	return nil
}

// sinkInput is the input record behind a write: kept is its index in
// twoPhase.kept, -1 for a punctuator's write; held when the write
// forwards a table update held in a table cache, which is the cache's,
// not one input record's.
type sinkInput struct {
	kept int
	held bool
}

// input keeps the input record of a write: once, when one input record
// makes several writes in a row (a FlatMap's), so that the policy meets
// it once however many of its writes are refused.
func (p *twoPhase) input(rec *kgo.Record, held bool) sinkInput {
	if held || rec == nil {
		return sinkInput{kept: -1, held: held}
	}
	if n := len(p.inputs); n > 0 {
		if last := p.inputs[n-1]; last.kept >= 0 && p.kept.same(last.kept, rec) {
			return last
		}
	}
	return sinkInput{kept: p.kept.add(rec)}
}

// forget drops the input records of the writes since the last prepare.
func (p *twoPhase) forget() {
	p.inputs = p.inputs[:0]
	p.kept.reset()
}

// refuseWrite applies the produce-error policy to the input record of a
// write the sink refused at prepare.
func (p *twoPhase) refuseWrite(in sinkInput, reason error) error {
	err := &sinkRefusal{fmt.Errorf("sink %q refused the record: %w", p.name, reason)}
	switch {
	case in.held:
		// As for a held update failing downstream: the worker processes
		// the transaction's records again with the caches off, and the
		// refusal then meets its own input record.
		return fmt.Errorf("%w: %w", runtime.ErrHeldUpdate, err)
	case in.kept < 0:
		return p.refusePunctuated(err)
	}
	return p.refuse(p.kept.record(in.kept), err)
}

// commit is the second phase, once the Kafka transaction committed.
func (p *twoPhase) commit() error {
	token := p.pending
	if token == nil {
		return nil
	}
	p.pending = nil
	if err := p.sink.Commit(token); err != nil {
		return fmt.Errorf("sink %q: commit: %w", p.name, err)
	}
	return nil
}

// abort drops the transaction of an aborted Kafka transaction.
func (p *twoPhase) abort() {
	token, open := p.pending, p.open
	p.pending, p.open = nil, false
	p.forget()
	if token == nil && !open {
		return // nothing written since the last commit
	}
	if err := p.sink.Abort(token); err != nil {
		p.broken = fmt.Errorf("eddy: sink %q: abort failed (%w); the task must be opened again to resolve it: %w", p.name, ErrSinkUnavailable, err)
	}
}

// sinkRefusal is a TransactionalSink's refusal of a record: the record's
// fault, which the produce-error policy handles.
type sinkRefusal struct{ error }

func (e *sinkRefusal) Unwrap() error { return e.error }

// uncertain leaves the prepared transaction to the next Recover: whether
// its Kafka transaction committed is unknown. The sink refuses records
// until the task opens again (its prepared transaction may hold locks
// that the next one would wait for).
func (p *twoPhase) uncertain() {
	if p.pending == nil {
		return
	}
	p.pending = nil
	p.broken = fmt.Errorf("eddy: sink %q: the outcome of the Kafka transaction it prepared for is unknown (%w); the task must be opened again to resolve it", p.name, ErrSinkUnavailable)
}

// Prepare prepares the transactional sinks' transactions, once per commit
// (runtime.TaskCommitter).
func (b *taskBuild) Prepare() error {
	for _, p := range b.transactional {
		if err := p.prepare(); err != nil {
			return err
		}
	}
	return nil
}

// Committed commits the transactional sinks' prepared transactions once
// the task's Kafka transaction committed (runtime.TaskCommitter).
func (b *taskBuild) Committed() error {
	var errs []error
	for _, p := range b.transactional {
		errs = append(errs, p.commit())
	}
	return errors.Join(errs...)
}

// Pending reports whether a transactional sink holds writes not yet
// prepared (runtime.TaskCommitter).
func (b *taskBuild) Pending() bool {
	for _, p := range b.transactional {
		if p.open {
			return true
		}
	}
	return false
}

// Uncertain leaves the sinks' prepared transactions to the next open
// (runtime.TaskCommitter).
func (b *taskBuild) Uncertain() {
	for _, p := range b.transactional {
		p.uncertain()
	}
}
