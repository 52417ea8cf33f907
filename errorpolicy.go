package eddy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/runtime"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/state"
)

// ErrorPolicy says what happens to a source record that failed: it did
// not decode (Config.OnDecodeError), its processing failed — a processor,
// mapper, aggregator or joiner returned an error or panicked, or an output
// failed to encode (Config.OnProcessError, Kafka Streams'
// ProcessingExceptionHandler) — or an output it produced is larger than
// Config.MaxRecordBytes (Config.OnProduceError, Kafka Streams'
// ProductionExceptionHandler). Failures of the state store or of the
// transaction are never the record's fault: they abort the transaction and
// the records are processed again, whatever the policy.
//
// The zero value, DefaultPolicy, is each field's own default: DeadLetter
// for decode errors, Fail for the others.
type ErrorPolicy int

const (
	// DefaultPolicy is the default of the field it is in.
	DefaultPolicy ErrorPolicy = iota
	// Fail stops the app with an error naming the record (a bug should
	// not be skipped silently).
	Fail
	// LogAndContinue logs the failure (the first at once, then a count at
	// most every 10 s per task) and goes on with the next record: a record
	// that does not decode is skipped; what a record whose processing
	// failed changed and emitted before it failed stays; an output too
	// large is dropped.
	LogAndContinue
	// DeadLetter writes the source record, unchanged, to "<topic>.dlq"
	// with the error, stage, topic, partition and offset in headers,
	// inside the same transaction (so it appears there exactly once), and
	// goes on. A record too large to dead-letter whole (with those headers
	// it exceeds Config.MaxRecordBytes) is dead-lettered truncated: its
	// key and value cut to fit, with headers saying what was cut and the
	// original sizes and SHA-256 (HeaderDLQTruncated and the others).
	DeadLetter
)

func (p ErrorPolicy) String() string {
	switch p {
	case DefaultPolicy:
		return "default"
	case Fail:
		return "fail"
	case LogAndContinue:
		return "log-and-continue"
	case DeadLetter:
		return "dead-letter"
	}
	return fmt.Sprintf("ErrorPolicy(%d)", int(p))
}

// ErrRecordTooLarge is returned (wrapped, naming the topic and the size)
// for an output record larger than Config.MaxRecordBytes.
var ErrRecordTooLarge = runtime.ErrRecordTooLarge

// DefaultMaxRecordBytes is Config.MaxRecordBytes's default.
const DefaultMaxRecordBytes = 1_000_000

// Header keys of a dead-letter record, besides the original's headers.
const (
	HeaderDLQError     = "eddy.error"
	HeaderDLQStage     = "eddy.stage" // "decode", "time", "process" or "produce"
	HeaderDLQTopic     = "eddy.topic"
	HeaderDLQPartition = "eddy.partition"
	HeaderDLQOffset    = "eddy.offset"
)

// DeadLetterTopic is the topic that receives the records of topic that
// could not be decoded, processed or produced, as the policies say.
func DeadLetterTopic(topic string) string { return topic + ".dlq" }

// recordFault is the failure of one source record, with the stage where it
// failed.
type recordFault struct {
	stage string
	err   error
}

func (f *recordFault) Error() string { return f.err.Error() }
func (f *recordFault) Unwrap() error { return f.err }

// notTheRecords reports whether err is the runtime's or the state's
// trouble, a service a serde needs being unavailable
// (serde.ErrUnavailable: a schema registry down or refusing the
// credentials), a sink outside Kafka unavailable or fenced
// (ErrSinkUnavailable, ErrSinkFenced), or the failure of an earlier
// record's update held in a table cache (runtime.ErrHeldUpdate), rather
// than the record's: such errors abort the transaction and the record is
// processed again; no policy skips it.
func notTheRecords(err error) bool {
	return errors.Is(err, state.ErrRead) || errors.Is(err, state.ErrCorrupt) || errors.Is(err, state.ErrClosed) || errors.Is(err, state.ErrFormat) ||
		errors.Is(err, runtime.ErrNoTransaction) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, ErrSuppressBufferFull) ||
		errors.Is(err, serde.ErrUnavailable) || errors.Is(err, ErrSinkUnavailable) || errors.Is(err, ErrSinkFenced) ||
		errors.Is(err, runtime.ErrHeldUpdate)
}

// processRecord runs r through its source with the error policies: a panic
// becomes an error, and a failure that is the record's is failed, skipped
// or dead-lettered as Config says.
func (b *taskBuild) processRecord(src rawReceiver, r *kgo.Record) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if _, fatal := p.(state.Fatal); fatal {
				panic(p) // the store's, not the record's: crash
			}
			// The stack goes to the log; the error (and a dead letter's
			// header) names the panic only.
			b.tc.Logger().Error("panic while processing a record", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = fmt.Errorf("eddy: panic: %v", p)
		}
		if err == nil || notTheRecords(err) {
			return
		}
		err = b.recordFailed(r, err)
	}()
	return src.receiveRaw(r)
}

func (b *taskBuild) recordFailed(r *kgo.Record, err error) error {
	stage, policy := "process", b.cfg.OnProcessError
	var fault *recordFault
	switch {
	case errors.As(err, &fault):
		if fault.stage == "decode" || fault.stage == stageTime {
			return err // the source applied OnDecodeError
		}
	case errors.Is(err, ErrRecordTooLarge) || errors.As(err, new(*sinkRefusal)):
		stage = "produce"
		policy = b.cfg.OnProduceError
	}
	switch policy {
	case LogAndContinue:
		b.countSkipped(stage, r, err)
		return nil
	case DeadLetter:
		return b.deadLetter(r, stage, err)
	}
	field := "OnProcessError"
	if stage == "produce" {
		field = "OnProduceError"
	}
	return &recordFault{stage: stage, err: fmt.Errorf("eddy: %s %s/%d@%d: %w (Config.%s decides: fail, log and continue, or dead-letter)",
		stage, r.Topic, r.Partition, r.Offset, err, field)}
}

// deadLetter writes r to its topic's dead-letter topic with the failure in
// headers, in the open transaction: unchanged if that fits
// Config.MaxRecordBytes, truncated otherwise (fitDeadLetter), so that no
// record is too large to dead-letter. The log says so only once the
// record is in the transaction.
func (b *taskBuild) deadLetter(r *kgo.Record, stage string, err error) error {
	topic := DeadLetterTopic(r.Topic)
	dl, ferr := fitDeadLetter(r, stage, err.Error(), cmp.Or(b.cfg.MaxRecordBytes, DefaultMaxRecordBytes))
	if ferr == nil {
		ts := r.Timestamp.UnixMilli()
		if stage == stageTime {
			// The record's time is what is wrong with it, and a broker may
			// refuse it too (Kafka 4.0 refuses producer times more than an
			// hour ahead by default): a dead letter it refused would stop
			// the app on every restart. The error header names the time.
			ts = runtime.NoTimestamp
		}
		ferr = b.tc.Produce(topic, dl.key, dl.value, ts, dl.headers)
	}
	if ferr != nil {
		// A recordFault, so that processRecord applies no policy to it
		// again.
		return &recordFault{stage: stage, err: fmt.Errorf("eddy: dead-letter %s/%d@%d to %s: %w (the record failed: %w)", r.Topic, r.Partition, r.Offset, topic, ferr, err)}
	}
	b.deadLetters++
	log := b.tc.Logger()
	if dl.cut == "" {
		log.Warn("record failed; dead-lettered", "stage", stage, "topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
			"dlq", topic, "err", err)
		return nil
	}
	log.Warn("record failed; dead-lettered truncated, as it is too large to dead-letter whole", "stage", stage,
		"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "dlq", topic, "truncated", dl.cut,
		"key_bytes", len(r.Key), "value_bytes", len(r.Value), "max_record_bytes", cmp.Or(b.cfg.MaxRecordBytes, DefaultMaxRecordBytes), "err", err)
	return nil
}

// punctuatedFailed applies the produce-error policy to a record a
// punctuator forwarded that a sink refused: it has no input record to
// dead-letter, so log-and-continue skips it (counted and logged as any
// skipped record) and any other policy fails the transaction.
func (b *taskBuild) punctuatedFailed(err error) error {
	if b.cfg.OnProduceError == LogAndContinue {
		b.countSkipped("produce", nil, err)
		return nil
	}
	return fmt.Errorf("eddy: a punctuator's record, which has no input record to dead-letter: %w (Config.OnProduceError = eddy.LogAndContinue skips such records)", err)
}

// countSkipped counts a record skipped by a log-and-continue policy; the
// first is logged with its error, then the count at most every 10 s. r
// is nil for a punctuator's record.
func (b *taskBuild) countSkipped(stage string, r *kgo.Record, err error) {
	b.skipped++
	if b.skipped > 1 && time.Since(b.skippedLogged) < 10*time.Second {
		return
	}
	b.skippedLogged = time.Now()
	where := []any{"punctuator", true}
	if r != nil {
		where = []any{"topic", r.Topic, "partition", r.Partition, "offset", r.Offset}
	}
	b.tc.Logger().Warn("record failed; skipped (log and continue)", append(append([]any{"stage", stage}, where...),
		"err", err, "skipped_since_start", b.skipped)...)
}

// checkPolicies reports error policies that name no policy.
func (c *Config) checkPolicies() error {
	var errs []error
	for _, f := range []struct {
		name   string
		policy ErrorPolicy
	}{{"OnDecodeError", c.OnDecodeError}, {"OnProcessError", c.OnProcessError}, {"OnProduceError", c.OnProduceError}} {
		if f.policy < DefaultPolicy || f.policy > DeadLetter {
			errs = append(errs, fmt.Errorf("%s %d: use eddy.Fail, eddy.LogAndContinue or eddy.DeadLetter (or leave it zero for the default)", f.name, f.policy))
		}
	}
	return errors.Join(errs...)
}

// policyDefaults gives each zero error policy its field's default.
func (c *Config) policyDefaults() {
	if c.OnDecodeError == DefaultPolicy {
		c.OnDecodeError = DeadLetter
	}
	if c.OnProcessError == DefaultPolicy {
		c.OnProcessError = Fail
	}
	if c.OnProduceError == DefaultPolicy {
		c.OnProduceError = Fail
	}
}
