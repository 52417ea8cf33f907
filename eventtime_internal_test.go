package eddy

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fromClient is the time franz-go gives a record of Kafka timestamp ms
// (its timeFromMillis): through an int64 of nanoseconds, which wraps.
func fromClient(ms int64) time.Time { return time.Unix(0, ms*1e6) }

func TestKafkaTimestamp(t *testing.T) {
	year := func(y int) int64 { return time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() }
	cases := []struct {
		name string
		ts   time.Time
		want int64
		ok   bool
	}{
		{"the epoch", fromClient(0), 0, true},
		{"no timestamp (-1)", fromClient(-1), -1, true},
		{"now", fromClient(year(2026)), year(2026), true},
		{"2200", fromClient(year(2200)), year(2200), true},
		{"the last the client holds", fromClient(maxClientMillis), maxClientMillis, true},
		{"2263, wrapped negative", fromClient(year(2263)), 0, false},
		{"2700, wrapped to 2115", fromClient(year(2700)), 0, false},
		{"3000, wrapped to 1830", fromClient(year(3000)), 0, false},
		{"1600, wrapped", fromClient(year(1600)), 0, false},
		{"2^57 ms, wrapped", fromClient(1<<57 - 1), 0, false},
		// Past 2^57 ms a wrapped time can be whole milliseconds again: the
		// limit kafkaTimestamp documents. This one is then refused as
		// negative.
		{"Kafka's largest, wrapped to -1 ms", fromClient(1<<63 - 1), -1, true},
		{"eddytest's 2263", time.UnixMilli(year(2263)), 0, false},
		{"eddytest's 2026", time.UnixMilli(year(2026)), year(2026), true},
	}
	for _, tc := range cases {
		got, ok := kafkaTimestamp(&kgo.Record{Timestamp: tc.ts})
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("%s: kafkaTimestamp = %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestMillisText(t *testing.T) {
	if got := millisText(90_000); got != "1m30s" {
		t.Errorf("millisText(90s) = %q", got)
	}
	if got := millisText(1<<63 - 1); got != "292471208 years" {
		t.Errorf("millisText(max) = %q", got)
	}
}

func TestAheadMillis(t *testing.T) {
	for d, want := range map[time.Duration]int64{-time.Second: 0, time.Nanosecond: 1, time.Millisecond: 1, 1500 * time.Microsecond: 2, 24 * time.Hour: 86_400_000} {
		if got := aheadMillis(d); got != want {
			t.Errorf("aheadMillis(%v) = %d, want %d", d, got, want)
		}
	}
}
