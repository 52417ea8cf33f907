package eddy

import (
	"fmt"
	"time"

	"github.com/eddy-streams/eddy/serde"
)

// JoinWindows bound a stream-stream join: a left record at time t joins
// the right records of its key from t - before to t + after (inclusive).
type JoinWindows struct {
	before, after, grace int64 // ms
	err                  error
}

// JoinWindowsOf joins records at most d apart, either way, with no grace
// period (see WithGrace).
func JoinWindowsOf(d time.Duration) JoinWindows {
	w := JoinWindows{before: d.Milliseconds(), after: d.Milliseconds()}
	if d < 0 {
		w.err = fmt.Errorf("eddy: join window %v: use zero or more", d)
	}
	return w
}

// Before sets how far before a left record the right records it joins may
// be.
func (w JoinWindows) Before(d time.Duration) JoinWindows {
	w.before = d.Milliseconds()
	if d < 0 && w.err == nil {
		w.err = fmt.Errorf("eddy: join window before %v: use zero or more", d)
	}
	return w
}

// After sets how far after a left record the right records it joins may be.
func (w JoinWindows) After(d time.Duration) JoinWindows {
	w.after = d.Milliseconds()
	if d < 0 && w.err == nil {
		w.err = fmt.Errorf("eddy: join window after %v: use zero or more", d)
	}
	return w
}

// WithGrace sets how long after its join window closes a record still
// accepts partners that arrive out of order. A record whose window closed
// (stream time past it + grace) is late and dropped; an unmatched record of
// a left or outer join gives its result with a missing partner only then.
func (w JoinWindows) WithGrace(grace time.Duration) JoinWindows {
	w.grace = grace.Milliseconds()
	if grace < 0 && w.err == nil {
		w.err = fmt.Errorf("eddy: join grace %v: use zero or more", grace)
	}
	return w
}

// JoinStreams joins two streams on their key within a time window: Kafka
// Streams' stream-stream join. Each side's records are kept for the window
// (plus grace) in stores named name+"-left" and name+"-right". Every pair of
// records of a key within the window gives joiner(key, l, true, r, true),
// as soon as the second arrives. With LeftJoin (OuterJoin) a left (any)
// record that found no partner gives joiner with the other side missing,
// once its window closed, never before, and then leaves the join: a later
// partner never follows a result that said there was none. Records after a key change are
// repartitioned automatically (topics name+"-left" and name+"-right"). The
// result's timestamp is the later of the pair's.
func JoinStreams[K, VL, VR, VO any](left Stream[K, VL], right Stream[K, VR], w JoinWindows, kind JoinKind, name string,
	keys serde.Serde[K], lvalues serde.Serde[VL], rvalues serde.Serde[VR],
	joiner func(key K, l VL, lok bool, r VR, rok bool) VO) Stream[K, VO] {
	t := left.t
	if w.err != nil {
		t.failOn("JoinStreams "+name, left.n, "%w", w.err)
	}
	if left.keyChanged {
		left = Repartition(left, name+"-left", keys, lvalues)
	}
	if right.keyChanged {
		right = Repartition(right, name+"-right", keys, rvalues)
	}
	// A record accepted at stream time now may join a partner as old as
	// now - before - after - grace: keep each side that long.
	retention := time.Duration(w.before+w.after+w.grace+1) * time.Millisecond
	lspec := NewSessionStoreSpec(name+"-left", retention, keys, serde.List(lvalues))
	rspec := NewSessionStoreSpec(name+"-right", retention, keys, serde.List(rvalues))
	n := t.add("join-streams-"+name, left.n, right.n)
	t.addStore(lspec.name, n, retention, lspec)
	t.addStore(rspec.name, n, retention, rspec)
	var lpend WindowStoreSpec[K, []VL]
	var rpend WindowStoreSpec[K, []VR]
	if kind != InnerJoin {
		lpend = NewWindowStoreSpec(name+"-left-unmatched", retention, keys, serde.List(lvalues))
		t.addStore(lpend.name, n, retention, lpend)
	}
	if kind == OuterJoin {
		rpend = NewWindowStoreSpec(name+"-right-unmatched", retention, keys, serde.List(rvalues))
		t.addStore(rpend.name, n, retention, rpend)
	}
	n.build = func(b *taskBuild) error {
		out := &emitter[K, VO]{}
		b.out[n] = out
		j := &streamJoin[K, VL, VR, VO]{b: b, out: out, w: w, kind: kind, joiner: joiner, name: name}
		var err error
		if j.lrecs, err = openSession(b, lspec); err != nil {
			return err
		}
		if j.rrecs, err = openSession(b, rspec); err != nil {
			return err
		}
		if kind != InnerJoin {
			if j.lpend, err = openWindow(b, lpend); err != nil {
				return err
			}
		}
		if kind == OuterJoin {
			if j.rpend, err = openWindow(b, rpend); err != nil {
				return err
			}
		}
		lin := output[K, VL](b, left.n)
		lin.children = append(lin.children, receiverFunc[K, VL](j.left))
		rin := output[K, VR](b, right.n)
		rin.children = append(rin.children, receiverFunc[K, VR](j.right))
		if kind != InnerJoin {
			b.atEndOfInput(j.emitUnmatched)
		}
		return nil
	}
	return Stream[K, VO]{t: t, n: n}
}

func openSession[K, V any](b *taskBuild, spec SessionStoreSpec[K, V]) (*SessionStore[K, V], error) {
	buf, err := b.tc.Store(spec.name)
	if err != nil {
		return nil, err
	}
	return spec.View(buf), nil
}

func openWindow[K, V any](b *taskBuild, spec WindowStoreSpec[K, V]) (*WindowStore[K, V], error) {
	buf, err := b.tc.Store(spec.name)
	if err != nil {
		return nil, err
	}
	return spec.View(buf), nil
}

// streamJoin is one task's instance of a stream-stream join. Records are
// kept per key and timestamp (lists: several may share one); unmatched
// left (and, for outer joins, right) records also wait in a store ordered
// by time, until their window closes.
type streamJoin[K, VL, VR, VO any] struct {
	b      *taskBuild
	out    *emitter[K, VO]
	w      JoinWindows
	kind   JoinKind
	joiner func(K, VL, bool, VR, bool) VO
	name   string

	lrecs *SessionStore[K, []VL]
	rrecs *SessionStore[K, []VR]
	lpend *WindowStore[K, []VL]
	rpend *WindowStore[K, []VR]
	// ldrained, rdrained: unmatched records before them were emitted.
	ldrained, rdrained drained
}

// drained remembers up to when a store of unmatched records was emitted,
// so that the store is read only when stream time moved past more of it.
// An abort rolls the emission back, so it forgets then (see Aborts).
type drained struct {
	until  int64
	aborts uint64
}

// partners are the records of the other side that a record joins: their
// timestamps and values, in time order.
type partners[V any] struct {
	ts []int64
	vs [][]V
}

func findPartners[K, V any](s *SessionStore[K, []V], k K, from, to, now int64, p *partners[V]) error {
	p.ts, p.vs = p.ts[:0], p.vs[:0]
	return s.find(k, from, to, now, func(w Window, vs []V) bool {
		p.ts, p.vs = append(p.ts, w.Start), append(p.vs, vs)
		return true
	})
}

func (j *streamJoin[K, VL, VR, VO]) left(r Record[K, VL]) error {
	if r.Tombstone {
		return nil
	}
	now, ts := j.b.tc.StreamTime(), r.Timestamp
	if ts+j.w.after+j.w.grace < now {
		return j.late(r.Timestamp, now)
	}
	if err := appendAt(j.lrecs, r.Key, ts, r.Value); err != nil {
		return err
	}
	var p partners[VR]
	if err := findPartners(j.rrecs, r.Key, ts-j.w.before, ts+j.w.after, now, &p); err != nil {
		return err
	}
	for i, rts := range p.ts {
		for _, rv := range p.vs[i] {
			if err := j.out.emit(Record[K, VO]{Key: r.Key, Value: j.joiner(r.Key, r.Value, true, rv, true), Timestamp: max(ts, rts), Headers: r.Headers}); err != nil {
				return err
			}
		}
		if j.rpend != nil { // those right records are matched now
			if err := j.rpend.Delete(r.Key, rts); err != nil {
				return err
			}
		}
	}
	if len(p.ts) == 0 && j.lpend != nil {
		if err := appendWindow(j.lpend, r.Key, ts, r.Value); err != nil {
			return err
		}
	}
	return j.closeWindows(now)
}

func (j *streamJoin[K, VL, VR, VO]) right(r Record[K, VR]) error {
	if r.Tombstone {
		return nil
	}
	now, ts := j.b.tc.StreamTime(), r.Timestamp
	if ts+j.w.before+j.w.grace < now {
		return j.late(r.Timestamp, now)
	}
	if err := appendAt(j.rrecs, r.Key, ts, r.Value); err != nil {
		return err
	}
	var p partners[VL]
	if err := findPartners(j.lrecs, r.Key, ts-j.w.after, ts+j.w.before, now, &p); err != nil {
		return err
	}
	for i, lts := range p.ts {
		for _, lv := range p.vs[i] {
			if err := j.out.emit(Record[K, VO]{Key: r.Key, Value: j.joiner(r.Key, lv, true, r.Value, true), Timestamp: max(ts, lts), Headers: r.Headers}); err != nil {
				return err
			}
		}
		if j.lpend != nil { // those left records are matched now
			if err := j.lpend.Delete(r.Key, lts); err != nil {
				return err
			}
		}
	}
	if len(p.ts) == 0 && j.rpend != nil {
		if err := appendWindow(j.rpend, r.Key, ts, r.Value); err != nil {
			return err
		}
	}
	return j.closeWindows(now)
}

func (j *streamJoin[K, VL, VR, VO]) late(ts, now int64) error {
	j.b.countLate("join "+j.name, ts, now)
	return nil
}

// closeWindows emits the unmatched records whose window closed, with the
// partner missing, and expires old records.
func (j *streamJoin[K, VL, VR, VO]) closeWindows(now int64) error {
	if err := j.emitUnmatched(now); err != nil {
		return err
	}
	if j.lpend != nil {
		j.lpend.Expire(now)
	}
	if j.rpend != nil {
		j.rpend.Expire(now)
	}
	j.lrecs.Expire(now)
	j.rrecs.Expire(now)
	return nil
}

// emitUnmatched emits the unmatched records whose window closed at stream
// time now, with the partner missing (left and outer joins).
func (j *streamJoin[K, VL, VR, VO]) emitUnmatched(now int64) error {
	var zl VL
	var zr VR
	if j.lpend != nil {
		if err := drain(j.lpend, j.lrecs, &j.ldrained, now-j.w.after-j.w.grace, func(k K, ts int64, l VL) error {
			return j.out.emit(Record[K, VO]{Key: k, Value: j.joiner(k, l, true, zr, false), Timestamp: ts})
		}); err != nil {
			return err
		}
	}
	if j.rpend != nil {
		if err := drain(j.rpend, j.rrecs, &j.rdrained, now-j.w.before-j.w.grace, func(k K, ts int64, r VR) error {
			return j.out.emit(Record[K, VO]{Key: k, Value: j.joiner(k, zl, false, r, true), Timestamp: ts})
		}); err != nil {
			return err
		}
	}
	return nil
}

// drain calls fn for each value waiting before the time before, oldest
// first, and removes them, from the unmatched store s and from recs, the
// side's records: a result that said "no partner" must never be followed
// by a match, and the other side may still accept a record that would
// have matched (its lateness bound differs when before != after). Every
// record of a key and timestamp in s is unmatched, so removing that key
// and timestamp from recs removes exactly them.
func drain[K, V any](s *WindowStore[K, []V], recs *SessionStore[K, []V], d *drained, before int64, fn func(k K, ts int64, v V) error) error {
	if a := s.buf.Aborts(); a != d.aborts {
		d.until, d.aborts = 0, a
	}
	if before <= d.until {
		return nil
	}
	type entry struct {
		k  K
		ts int64
		vs []V
	}
	var due []entry
	if err := s.fetchAll(d.until, before, func(k K, ts int64, vs []V) bool {
		due = append(due, entry{k, ts, vs})
		return true
	}); err != nil {
		return err
	}
	for _, e := range due {
		for _, v := range e.vs {
			if err := fn(e.k, e.ts, v); err != nil {
				return err
			}
		}
		if err := s.Delete(e.k, e.ts); err != nil {
			return err
		}
		if err := recs.Remove(e.k, Window{Start: e.ts, End: e.ts}); err != nil {
			return err
		}
	}
	d.until = before
	return nil
}

// appendAt adds v to the values of k at time ts in a session store used as
// a per-key time index.
func appendAt[K, V any](s *SessionStore[K, []V], k K, ts int64, v V) error {
	w := Window{Start: ts, End: ts}
	vs, _, err := s.get(k, w)
	if err != nil {
		return err
	}
	return s.Put(k, w, append(vs, v))
}

func appendWindow[K, V any](s *WindowStore[K, []V], k K, ts int64, v V) error {
	vs, _, err := s.Get(k, ts)
	if err != nil {
		return err
	}
	return s.Put(k, ts, append(vs, v))
}
