package kafka

import (
	"math"

	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// RetryBackoff is the wait before a client's fails-th retry of a request,
// as Kafka's Java clients wait (KIP-580: retry.backoff.ms 100,
// retry.backoff.max.ms 1000, doubling, ±20 % jitter). franz-go's default
// doubles from 250 ms up to 5 s: after a few seconds of refused
// connections an app's next try could come 4–5 s after the broker was
// back, which was most of the recovery `eddy chaos` measured after such a
// fault (issue 15). A retry a second during an outage costs nothing that
// matters. Use it with RetryOptions, not alone: franz-go also stops after
// 20 retries, which at this pace is ~18 s instead of its 30 s RetryTimeout.
func RetryBackoff(fails int) time.Duration {
	const (
		first = 100 * time.Millisecond
		most  = time.Second
	)
	d := most
	if fails <= 1 {
		d = first
	} else if fails < 5 {
		d = first << (fails - 1)
	}
	return time.Duration(float64(min(d, most)) * (0.8 + 0.4*rand.Float64()))
}

// RetryOptions make a client retry as Kafka's clients do: RetryBackoff
// between tries, for as long as franz-go's RetryTimeout allows (30 s; the
// session timeout for group requests) rather than a count of tries, as
// Java's delivery.timeout.ms and default.api.timeout.ms bound them. A
// produce that failed on a broken connection waits for a metadata refresh,
// which franz-go makes at most every 5 s by default: a chaos run's commit
// waited 3.7 s past the end of a connection fault for it. Kafka's clients
// refresh after retry.backoff.ms; half a second is close, and costs a
// metadata request at most twice a second while something is wrong.
func RetryOptions() []kgo.Opt {
	return []kgo.Opt{kgo.RetryBackoffFn(RetryBackoff), kgo.RequestRetries(math.MaxInt32), kgo.MetadataMinAge(500 * time.Millisecond)}
}
