package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	ledger "github.com/eddy-streams/eddy/examples/ledger/pipeline"
	"github.com/eddy-streams/eddy/internal/kafka"
)

// Generator produces payments at a steady rate: ids "p<n>", accounts
// "acct-<k>", amounts in [-500, 1000]. Every InvalidEvery-th record is a
// malformed payment, to show the dead-letter topic.
type Generator struct {
	Seeds        []string
	Topic        string
	Rate         int // payments per second
	Accounts     int
	InvalidEvery int // 0 = never
	Seed         uint64
	// Events, when set, gives every payment an event time (its "ts" and
	// its record timestamp); otherwise the record timestamp is the
	// producer's clock and there is no "ts".
	Events *EventTime
	// Hostile, when set, makes every Hostile.Every-th record a hostile
	// one (see Hostile), which Produced counts and Invalid does not; one
	// that falls on a malformed payment comes right after it.
	Hostile *Hostile
	// Encode writes a payment's value; nil writes JSON. The demo's
	// --format avro and protobuf set the ledger's serde of that format.
	// Malformed payments are JSON whatever the format: on a topic of
	// framed records, they are also not in the format.
	Encode     func(ledger.Payment) ([]byte, error)
	ClientOpts []kgo.Opt

	produced atomic.Int64
	invalid  atomic.Int64
	failed   atomic.Int64
	maxTS    atomic.Int64
}

// EventTime is the event-time clock of generated payments. Payment n is
// stamped Start + n·Step, so the data, not the wall clock, decides the
// windows and a run is reproducible from its seed. A fraction of payments
// is stamped earlier, to exercise grace and late records.
type EventTime struct {
	Start int64   // ms since the epoch, the time of payment 0
	Step  float64 // ms of event time between two payments
	// OutOfOrder is the fraction of payments stamped up to Disorder ms
	// (exclusive) earlier: within the grace period when Disorder is at
	// most the grace, so they are accepted though out of order.
	OutOfOrder float64
	Disorder   int64
	// Late is the fraction of payments stamped between LateBy and
	// 2·LateBy ms earlier: with LateBy beyond window + grace their window
	// has closed, and they are dropped.
	Late   float64
	LateBy int64
}

// Produced is the number of records acknowledged so far, valid or not.
func (g *Generator) Produced() int64 { return g.produced.Load() }

// Failed is the number of payments whose produce failed for good; the
// broker may have written them or not (the verifier reads what is there).
func (g *Generator) Failed() int64 { return g.failed.Load() }

// Invalid is the number of malformed payments acknowledged so far.
func (g *Generator) Invalid() int64 { return g.invalid.Load() }

// hostileRecords are the hostile records written (none without Hostile).
func (g *Generator) hostileRecords() []HostileRecord {
	if g.Hostile == nil {
		return nil
	}
	return g.Hostile.Records()
}

// hostileBad is the number of hostile records written that the apps
// refuse.
func (g *Generator) hostileBad() int64 {
	if g.Hostile == nil {
		return 0
	}
	return g.Hostile.BadCount()
}

// Run produces until ctx is cancelled, then flushes.
func (g *Generator) Run(ctx context.Context) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(g.Seeds...),
		kgo.DefaultProduceTopic(g.Topic),
		kgo.RecordRetries(1 << 20),
	}, g.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("demo: generator client: %w", err)
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(g.Seed, 0x5eed))
	var hostile *hostileRun
	if g.Hostile != nil && g.Hostile.Every > 0 {
		if hostile, err = g.startHostile(ctx, cl); err != nil {
			return err
		}
		defer hostile.close()
	}
	const tick = 10 * time.Millisecond
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	start := time.Now()
	var n int64
	hostileDue := false // a malformed payment took a hostile record's place
	for {
		select {
		case <-ctx.Done():
			flushCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := cl.Flush(flushCtx); err != nil {
				return fmt.Errorf("demo: generator flush: %w", err)
			}
			return nil
		case now := <-ticker.C:
			due := int64(now.Sub(start).Seconds() * float64(g.Rate))
			for ; n < due; n++ {
				if hostile != nil && n%int64(g.Hostile.Every) == int64(g.Hostile.Every-1) {
					hostileDue = true
				}
				if hostileDue && !g.invalidAt(n) {
					hostileDue = false
					if err := hostile.write(ctx, cl); err != nil {
						return err
					}
					continue
				}
				r, err := g.next(rng, n)
				if err != nil {
					return err
				}
				if hostile != nil {
					hostile.note(r)
				}
				promise := g.promise
				if g.invalidAt(n) {
					promise = g.promiseInvalid
				}
				cl.Produce(context.Background(), r, promise)
			}
		}
	}
}

func (g *Generator) next(rng *rand.Rand, n int64) (*kgo.Record, error) {
	account := fmt.Sprintf("acct-%04d", rng.IntN(g.Accounts))
	r := &kgo.Record{Key: []byte(account)}
	if g.invalidAt(n) {
		r.Value = []byte(fmt.Sprintf(`{"id":"p%d","account":%q}`, n, account)) // no amount
		return r, nil
	}
	p := ledger.Payment{ID: fmt.Sprintf("p%d", n), Account: account, Amount: rng.Int64N(1501) - 500}
	if e := g.Events; e != nil {
		ts := e.Start + int64(float64(n)*e.Step)
		g.noteTS(ts)
		switch x := rng.Float64(); {
		case x < e.Late:
			ts -= e.LateBy + rng.Int64N(e.LateBy+1)
		case x < e.Late+e.OutOfOrder && e.Disorder > 0:
			ts -= rng.Int64N(e.Disorder)
		}
		p.TS, r.Timestamp = ts, time.UnixMilli(ts)
	}
	var err error
	r.Value, err = g.encode(p)
	return r, err
}

func (g *Generator) encode(p ledger.Payment) ([]byte, error) {
	if g.Encode != nil {
		v, err := g.Encode(p)
		if err != nil {
			return nil, fmt.Errorf("demo: encode payment %s: %w", p.ID, err)
		}
		return v, nil
	}
	return json.Marshal(p)
}

// invalidAt reports whether record n is a malformed payment.
func (g *Generator) invalidAt(n int64) bool {
	return g.InvalidEvery > 0 && n%int64(g.InvalidEvery) == int64(g.InvalidEvery-1)
}

// noteTS keeps the largest event time generated.
func (g *Generator) noteTS(ts int64) {
	for {
		cur := g.maxTS.Load()
		if ts <= cur || g.maxTS.CompareAndSwap(cur, ts) {
			return
		}
	}
}

// Close writes one last payment to every partition of the topic, stamped
// advance ms after the latest event time generated, and waits for them. With
// advance = window + grace they move every partition's stream time past the
// close of every window that holds a generated payment, so the windowed
// aggregation's output becomes final. Call it after Run returned.
func (g *Generator) Close(ctx context.Context, advance int64) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(g.Seeds...), kgo.DefaultProduceTopic(g.Topic),
		kgo.RecordRetries(1 << 20)}, g.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("demo: generator client: %w", err)
	}
	defer cl.Close()
	parts, err := kafka.Partitions(ctx, cl, g.Topic)
	if err != nil {
		return fmt.Errorf("demo: closing payments: %w", err)
	}
	n := parts[g.Topic]
	ts := g.maxTS.Load() + advance
	var recs []*kgo.Record
	for p := int32(0); p < n; p++ {
		// An account whose key the default partitioner puts on p: the
		// aggregation is per partition, and a record on another partition
		// than its key's would not be where the account's windows are.
		var account string
		for i := 0; ; i++ {
			account = fmt.Sprintf("acct-close-%d-%d", p, i)
			if kafka.KeyPartition([]byte(account), n) == p {
				break
			}
		}
		v, err := g.encode(ledger.Payment{ID: fmt.Sprintf("close-%d", p), Account: account, Amount: 0, TS: ts})
		if err != nil {
			return err
		}
		recs = append(recs, &kgo.Record{Key: []byte(account), Value: v, Timestamp: time.UnixMilli(ts)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("demo: closing payments: %w", err)
	}
	g.produced.Add(int64(len(recs)))
	return nil
}

func (g *Generator) promise(r *kgo.Record, err error) {
	if err != nil {
		g.failed.Add(1)
		return
	}
	g.produced.Add(1)
}

func (g *Generator) promiseInvalid(r *kgo.Record, err error) {
	g.promise(r, err)
	if err == nil {
		g.invalid.Add(1)
	}
}
