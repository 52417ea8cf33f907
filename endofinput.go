package eddy

import "github.com/eddy-streams/eddy/internal/runtime"

// EndOfInputTime is the stream time that the end of a bounded input moves
// a task to (the in-process runner at the end of a generator's events,
// eddytest's Driver.EndOfInput): later than any record's timestamp, so
// that every window closes and emits its final result, as Flink's
// end-of-input watermark (Long.MAX_VALUE) fires every event-time timer.
// It is 2^62 rather than math.MaxInt64 so that window arithmetic (a time
// plus a window's size and grace) cannot overflow. Stream-time
// punctuators fire once with it, in a task that has seen a record (a task
// that never did has no stream time to move from).
const EndOfInputTime = runtime.EndOfInputTime

// atEndOfInput registers what a node does when its task's input ends: fn
// is called with EndOfInputTime after the nodes upstream of it in the
// task have acted, and what it forwards reaches the nodes downstream
// before they act. Call it from a node's build.
func (b *taskBuild) atEndOfInput(fn func(end int64) error) {
	b.endOfInput = append(b.endOfInput, fn)
}

// EndOfInput tells the task that its input has ended (runtime's
// TaskInputEnder). Each operator acts on stream time end in node order —
// windows closed by then emit their final results (EmitFinal),
// suppressed updates are forwarded, stream joins emit the unmatched
// records of outer joins — with the table caches flushed before each, so
// that an operator sees every update upstream of it. Stream time is moved
// to end only afterwards: the records that upstream operators forward
// meanwhile (final window results, with their own timestamps) are not
// late for the windows downstream. Then the stream-time punctuators fire.
func (b *taskBuild) EndOfInput(end int64) error {
	if err := b.Flush(); err != nil {
		return err
	}
	for _, fn := range b.endOfInput {
		if err := fn(end); err != nil {
			return err
		}
		if err := b.Flush(); err != nil {
			return err
		}
	}
	prev := b.tc.StreamTime()
	b.tc.AdvanceStreamTime(end)
	return b.punctuateStreamTime(prev)
}
