package eddy

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/runtime"
	"github.com/eddy-streams/eddy/state"
)

// ProcessErrorPolicy says what happens to a source record whose processing
// failed: a processor, mapper, aggregator or joiner returned an error or
// panicked, or an output failed to encode (Kafka Streams'
// ProcessingExceptionHandler). Failures of the state store or of the
// transaction are never the record's fault: they abort the transaction and
// the records are processed again, whatever the policy.
type ProcessErrorPolicy int

const (
	// ProcessErrorFail stops the app with an error naming the record
	// (the default: a bug should not be skipped silently).
	ProcessErrorFail ProcessErrorPolicy = iota
	// ProcessErrorLogAndContinue logs the failure (the first at once,
	// then a count at most every 10 s per task) and goes on with the next
	// record. What the record changed and emitted before it failed stays.
	ProcessErrorLogAndContinue
	// ProcessErrorDeadLetter writes the source record, unchanged, to
	// "<topic>.dlq" with the error, stage, topic, partition and offset in
	// headers, inside the same transaction (so it appears there exactly
	// once), and goes on.
	ProcessErrorDeadLetter
)

// ProduceErrorPolicy says what happens when an output record cannot be
// produced because it is larger than Config.MaxRecordBytes (Kafka Streams'
// ProductionExceptionHandler).
type ProduceErrorPolicy int

const (
	// ProduceErrorFail stops the app with an error naming the topic and
	// the record's size (the default).
	ProduceErrorFail ProduceErrorPolicy = iota
	// ProduceErrorLogAndContinue drops that output record (logged and
	// counted like ProcessErrorLogAndContinue) and goes on.
	ProduceErrorLogAndContinue
	// ProduceErrorDeadLetter writes the source record that produced it to
	// "<topic>.dlq", like ProcessErrorDeadLetter, and goes on.
	ProduceErrorDeadLetter
)

// ErrRecordTooLarge is returned (wrapped, naming the topic and the size)
// for an output record larger than Config.MaxRecordBytes.
var ErrRecordTooLarge = runtime.ErrRecordTooLarge

// DefaultMaxRecordBytes is Config.MaxRecordBytes's default.
const DefaultMaxRecordBytes = runtime.DefaultMaxRecordBytes

// Header keys of a dead-letter record, besides the original's headers.
const (
	HeaderDLQError     = "eddy.error"
	HeaderDLQStage     = "eddy.stage" // "decode", "process" or "produce"
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
// trouble rather than the record's: such errors abort the transaction and
// the record is processed again; no policy skips it.
func notTheRecords(err error) bool {
	return errors.Is(err, state.ErrRead) || errors.Is(err, state.ErrCorrupt) || errors.Is(err, state.ErrClosed) ||
		errors.Is(err, runtime.ErrTransaction) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
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
		if fault.stage == "decode" {
			return err // decodeFailed applied its own policy
		}
	case errors.Is(err, ErrRecordTooLarge):
		stage = "produce"
		switch b.cfg.OnProduceError {
		case ProduceErrorFail:
			policy = ProcessErrorFail
		case ProduceErrorLogAndContinue:
			policy = ProcessErrorLogAndContinue
		case ProduceErrorDeadLetter:
			policy = ProcessErrorDeadLetter
		}
	}
	switch policy {
	case ProcessErrorLogAndContinue:
		b.countSkipped(stage, r, err)
		return nil
	case ProcessErrorDeadLetter:
		return b.deadLetter(r, stage, err)
	}
	field := "OnProcessError"
	if stage == "produce" {
		field = "OnProduceError"
	}
	return &recordFault{stage: stage, err: fmt.Errorf("eddy: %s %s/%d@%d: %w (Config.%s decides: fail, log and continue, or dead-letter)",
		stage, r.Topic, r.Partition, r.Offset, err, field)}
}

// deadLetter writes r, unchanged, to its topic's dead-letter topic with the
// failure in headers, in the open transaction.
func (b *taskBuild) deadLetter(r *kgo.Record, stage string, err error) error {
	headers := append(append([]kgo.RecordHeader(nil), r.Headers...),
		kgo.RecordHeader{Key: HeaderDLQError, Value: truncate(err.Error(), maxErrorHeader)},
		kgo.RecordHeader{Key: HeaderDLQStage, Value: []byte(stage)},
		kgo.RecordHeader{Key: HeaderDLQTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderDLQPartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		kgo.RecordHeader{Key: HeaderDLQOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
	)
	b.tc.Logger().Warn("record failed; sent to the dead-letter topic", "stage", stage,
		"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
	b.deadLetters++
	return b.tc.Produce(DeadLetterTopic(r.Topic), r.Key, r.Value, r.Timestamp.UnixMilli(), headers)
}

// maxErrorHeader bounds the error text a dead letter carries, so that a
// long error cannot make the dead letter itself too large.
const maxErrorHeader = 1 << 10

func truncate(s string, n int) []byte {
	if len(s) > n {
		s = s[:n-3] + "..."
	}
	return []byte(s)
}

// countSkipped counts a record skipped by a log-and-continue policy; the
// first is logged with its error, then the count at most every 10 s.
func (b *taskBuild) countSkipped(stage string, r *kgo.Record, err error) {
	b.skipped++
	if b.skipped > 1 && time.Since(b.skippedLogged) < 10*time.Second {
		return
	}
	b.skippedLogged = time.Now()
	b.tc.Logger().Warn("record failed; skipped (log and continue)", "stage", stage,
		"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err, "skipped_since_start", b.skipped)
}

// checkPolicies reports error policies that name no policy.
func (c *Config) checkPolicies() error {
	var errs []error
	if c.OnDecodeError < DecodeErrorDeadLetter || c.OnDecodeError > DecodeErrorLogAndContinue {
		errs = append(errs, fmt.Errorf("OnDecodeError %d: use DecodeErrorDeadLetter, DecodeErrorFail or DecodeErrorLogAndContinue", c.OnDecodeError))
	}
	if c.OnProcessError < ProcessErrorFail || c.OnProcessError > ProcessErrorDeadLetter {
		errs = append(errs, fmt.Errorf("OnProcessError %d: use ProcessErrorFail, ProcessErrorLogAndContinue or ProcessErrorDeadLetter", c.OnProcessError))
	}
	if c.OnProduceError < ProduceErrorFail || c.OnProduceError > ProduceErrorDeadLetter {
		errs = append(errs, fmt.Errorf("OnProduceError %d: use ProduceErrorFail, ProduceErrorLogAndContinue or ProduceErrorDeadLetter", c.OnProduceError))
	}
	if c.MaxRecordBytes < 0 {
		errs = append(errs, fmt.Errorf("MaxRecordBytes %d: use 0 for the default (%d) or a positive size", c.MaxRecordBytes, DefaultMaxRecordBytes))
	}
	return errors.Join(errs...)
}
