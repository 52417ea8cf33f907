package eddy

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// stageTime is the stage of a source record refused for its event time:
// negative, beyond what the Kafka client represents, or more than
// Config.MaxEventTimeAhead ahead of the wall clock. OnDecodeError decides
// what happens to it, as for a record that does not decode.
const stageTime = "time"

// maxClientMillis is the last Kafka timestamp (ms) that the Kafka client
// represents: franz-go turns a timestamp into a time.Time through its
// nanoseconds since the epoch, an int64, which holds up to April 2262.
const maxClientMillis = math.MaxInt64 / int64(time.Millisecond)

// errTimeOutOfRange is the reason of a record whose Kafka timestamp the
// client could not represent.
var errTimeOutOfRange = errors.New("timestamp out of range: negative or after year 2262, which the Kafka client cannot represent")

// kafkaTimestamp returns r's Kafka timestamp in ms since the epoch, or
// false when the Kafka client could not represent it. A Kafka timestamp is
// whole milliseconds; franz-go multiplies it by a million into an int64 of
// nanoseconds, which wraps around past 2262 (or before 1678) to a time
// that is no longer whole milliseconds, negative or plausible alike. (It
// wraps to whole milliseconds again only for timestamps beyond about
// 2^57 ms, four million years, which this cannot tell.) Records that do not
// come from the client (eddytest's) are refused past the same limit, as
// they could not have come from it.
func kafkaTimestamp(r *kgo.Record) (int64, bool) {
	if r.Timestamp.Nanosecond()%int(time.Millisecond) != 0 {
		return 0, false
	}
	ms := r.Timestamp.UnixMilli()
	return ms, ms <= maxClientMillis && ms >= -maxClientMillis
}

// eventTime returns the event time of r, whose key and value decoded to k
// and v, or the reason it is refused (stage time).
func (s *sourceNode[K, V]) eventTime(r *kgo.Record, k K, v V) (int64, error) {
	if s.wallClock {
		return s.b.tc.WallClock(), nil
	}
	ts, ok := kafkaTimestamp(r)
	if !ok {
		// Even with TimestampFrom: the record's metadata is garbage, and
		// the function would be handed it.
		return 0, errTimeOutOfRange
	}
	if s.ts != nil {
		ts = s.ts(k, v, ts)
	}
	if ts < 0 {
		return 0, fmt.Errorf("timestamp: %d is negative; an event time is ms since the Unix epoch", ts)
	}
	// A repartition topic's times were checked at the app's sources; the
	// wall clock is the one the poll read.
	if s.maxAhead > 0 && !s.internal {
		if ahead := ts - s.b.tc.WallClock(); ahead > s.maxAhead {
			return 0, fmt.Errorf("timestamp: %d (%s) is %s ahead of the wall clock, more than Config.MaxEventTimeAhead (%v)",
				ts, time.UnixMilli(ts).UTC().Format(time.RFC3339), millisText(ahead), s.b.cfg.MaxEventTimeAhead)
		}
	}
	return ts, nil
}

// aheadMillis is Config.MaxEventTimeAhead in whole ms, rounded up so that
// a positive one under a millisecond does not turn the check off; 0 when
// it is off (negative).
func aheadMillis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// millisText writes ms milliseconds as a duration, or in years when a
// time.Duration cannot hold them.
func millisText(ms int64) string {
	if ms > maxClientMillis {
		return fmt.Sprintf("%d years", ms/(365*24*time.Hour).Milliseconds())
	}
	return (time.Duration(ms) * time.Millisecond).String()
}
