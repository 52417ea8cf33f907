package eddy

import "time"

// SessionWindows group a key's records into sessions: runs of records no
// more than the inactivity gap apart. A record that bridges two sessions
// merges them. A session is reported as Window{Start, End} with Start its
// first and End its last record's timestamp (both inclusive, as in Kafka
// Streams).
type SessionWindows struct {
	gap int64 // ms
	windowLimits
}

// SessionWindowsWithGap returns session windows with the given inactivity
// gap and no grace period (see WithGrace).
func SessionWindowsWithGap(gap time.Duration) SessionWindows {
	return SessionWindows{gap: gap.Milliseconds(), windowLimits: atLeastOneMs("session gap", gap)}
}

// WithGrace sets how long a session still accepts out-of-order records
// after it could last have grown: a session closes once stream time passes
// its end + gap + grace; a record that would only extend closed sessions is
// late.
func (w SessionWindows) WithGrace(grace time.Duration) SessionWindows {
	w.windowLimits.setGrace("session", grace)
	return w
}

// sessionWindowing merges a record with the key's sessions within a gap of
// it, and keeps the sessions in a session store.
type sessionWindowing[K, V, A any] struct {
	win   SessionWindows
	fold  fold[K, V, A]
	store *SessionStore[K, A]
	found []session[A]
}

type session[A any] struct {
	Window
	agg A
}

func (s *sessionWindowing[K, V, A]) add(p *windowAggregator[K, V, A], r Record[K, V], now int64) (bool, error) {
	ts := r.Timestamp
	closeBefore := s.closedBefore(now)
	s.found = s.found[:0]
	// With EmitFinal a closed session was emitted as final: a record
	// never merges into it (it may start a session beside it), or the
	// session would be emitted twice. With every update, as in Kafka
	// Streams, a record that is not late merges with any session in reach.
	earliest := ts - s.win.gap
	if p.final {
		earliest = max(earliest, closeBefore)
	}
	err := s.store.find(r.Key, earliest, ts+s.win.gap, now, func(w Window, agg A) bool {
		s.found = append(s.found, session[A]{Window: w, agg: agg})
		return true
	})
	if err != nil {
		return false, err
	}
	merged := Window{Start: ts, End: ts}
	for _, f := range s.found {
		merged.Start, merged.End = min(merged.Start, f.Start), max(merged.End, f.End)
	}
	if merged.End < closeBefore {
		return false, nil
	}
	agg := s.fold.init()
	for _, f := range s.found {
		agg = s.fold.merge(r.Key, agg, f.agg)
		if err := s.store.Remove(r.Key, f.Window); err != nil {
			return false, err
		}
		if f.Window != merged {
			if err := p.replaced(r, f.Window); err != nil {
				return false, err
			}
		}
	}
	agg = s.fold.add(r.Key, r.Value, agg)
	if err := s.store.Put(r.Key, merged, agg); err != nil {
		return false, err
	}
	return true, p.updated(r, merged, agg)
}

// closedBefore: sessions that ended before it can grow no more.
func (s *sessionWindowing[K, V, A]) closedBefore(now int64) int64 {
	return now - s.win.gap - s.win.windowLimits.grace
}

func (s *sessionWindowing[K, V, A]) closed(from, to int64, fn func(k K, w Window, agg A) bool) error {
	return s.store.fetchEnded(from, to, fn)
}

// finalTimestamp: a session's End is its last record's timestamp.
func (s *sessionWindowing[K, V, A]) finalTimestamp(w Window) int64 { return w.End }

func (s *sessionWindowing[K, V, A]) expire(now int64) { s.store.Expire(now) }
