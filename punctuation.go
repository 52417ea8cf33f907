package eddy

import (
	"fmt"
	"time"

	"github.com/eddy-streams/eddy/state"
)

// PunctuationType says which clock drives a punctuator.
type PunctuationType int

const (
	// StreamTime punctuators fire as the task's stream time (the largest
	// record timestamp seen) passes each interval: deterministic, replayed
	// identically, silent while no records arrive.
	StreamTime PunctuationType = iota
	// WallClockTime punctuators fire as the system clock passes each
	// interval, records or not (checked at least once per commit interval).
	WallClockTime
)

// Punctuator is a scheduled callback. ts is the time it fires at: the
// stream time or the wall clock, in ms since the epoch. It runs inside the
// task's transaction, like Process: it may read and write stores and
// forward records, and its effects commit or abort with the records'.
type Punctuator func(ts int64) error

type punctuator struct {
	interval int64 // ms
	// next and started drive wall-clock punctuators only: fire once the
	// clock reaches next, set from the clock's first reading.
	next     int64
	started  bool
	fn       Punctuator
	canceled bool
}

// Cancellable stops a scheduled punctuator.
type Cancellable interface{ Cancel() }

func (p *punctuator) Cancel() { p.canceled = true }

// Schedule registers fn to run every interval of the chosen clock, as Kafka
// Streams' ProcessorContext.schedule does. Call it from Init.
//
// A stream-time punctuator fires when a record carries stream time across a
// multiple of interval (ts is the new stream time): a pure function of the
// records, so a replay after an abort or a restart fires at the same
// records. A wall-clock punctuator fires at the first check (within a
// commit interval) at or after one interval from the first check it saw.
// Either fires once when its clock jumps several intervals. Punctuators are
// not persisted: a task that restarts schedules them again in Init.
func (c *ProcessorContext[K, V]) Schedule(interval time.Duration, typ PunctuationType, fn Punctuator) (Cancellable, error) {
	if interval < time.Millisecond {
		return nil, fmt.Errorf("eddy: processor %s: punctuation interval %v: use at least 1ms", c.name, interval)
	}
	p := &punctuator{interval: interval.Milliseconds(), fn: fn}
	switch typ {
	case StreamTime:
		c.b.streamPunctuators = append(c.b.streamPunctuators, p)
	case WallClockTime:
		c.b.wallPunctuators = append(c.b.wallPunctuators, p)
	default:
		return nil, fmt.Errorf("eddy: processor %s: unknown punctuation type %d", c.name, typ)
	}
	return p, nil
}

// due reports whether fire would run the punctuator at now.
func (p *punctuator) due(now int64) bool {
	return !p.canceled && p.started && now >= p.next
}

// fire runs a wall-clock punctuator if the clock reached its next time.
func (p *punctuator) fire(now int64) error {
	if p.canceled {
		return nil
	}
	if !p.started {
		p.started, p.next = true, now+p.interval
		return nil
	}
	if now < p.next {
		return nil
	}
	p.next = now + p.interval
	return p.fn(now)
}

// punctuateStreamTime runs the stream-time punctuators whose interval
// boundary the stream time crossed from prev to now.
func (b *taskBuild) punctuateStreamTime(prev int64) error {
	if len(b.streamPunctuators) == 0 {
		return nil
	}
	now := b.tc.StreamTime()
	if prev == state.NoStreamTime || now <= prev {
		return nil // no crossing: the first record starts the clock
	}
	flushed := false
	for _, p := range b.streamPunctuators {
		if p.canceled || floorDiv(prev, p.interval) == floorDiv(now, p.interval) {
			continue
		}
		if !flushed {
			// A punctuator may read stores downstream of a table
			// cache, or forward records that meet its updates: it
			// must not see them held back.
			if err := b.Flush(); err != nil {
				return err
			}
			flushed = true
		}
		if err := p.fn(now); err != nil {
			return err
		}
	}
	return nil
}

// floorDiv is a / m rounded down.
func floorDiv(a, m int64) int64 {
	q := a / m
	if a%m != 0 && a < 0 {
		q--
	}
	return q
}

// Punctuate runs the wall-clock punctuators; the runtime calls it inside
// the open transaction at least once per commit interval.
func (b *taskBuild) Punctuate(now time.Time) error {
	ms := now.UnixMilli()
	flushed := false
	for _, p := range b.wallPunctuators {
		if !flushed && p.due(ms) {
			if err := b.Flush(); err != nil { // as before a stream-time punctuator
				return err
			}
			flushed = true
		}
		if err := p.fire(ms); err != nil {
			return err
		}
	}
	return nil
}
