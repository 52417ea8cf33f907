package queries

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/eddy-streams/eddy/internal/plan"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// output is one record a query wrote.
type output struct {
	key, value []byte
	ts         int64
}

const testOut = "out"

// run runs q over events [0, n) of g through eddytest (one task per
// sub-topology, repartitions followed in order, as the benchmark runs it)
// and returns what q wrote. Each event goes to its kind's topic, in index
// order, keyed and encoded as nexmark.Produce writes it; kinds whose topic
// q does not read are skipped.
func run(t *testing.T, q Query, g *nexmark.Generator, n int64) []output {
	t.Helper()
	out := testOut
	if q.Files != nil {
		out = t.TempDir() // a directory of files, read back at the end
	}
	return runTo(t, q, g, n, out)
}

// runTo is run with q's output named: a topic, or the directory of a
// query whose result is files (Query.Files).
func runTo(t *testing.T, q Query, g *nexmark.Generator, n int64, out string) []output {
	t.Helper()
	topics := nexmark.DefaultTopics()
	topo := eddy.NewTopology()
	q.Build(topo, topics, out)
	d, err := eddytest.New(topo, eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	reads := map[string]bool{}
	rt, err := plan.Build(topo, eddy.Config{AppID: "eddytest"})
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range rt.Subtopologies {
		for _, s := range sub.Sources {
			reads[s] = true
		}
	}
	var key, value []byte
	one := func(i int64) error {
		e := g.Event(i)
		var topic string
		switch e.Kind {
		case nexmark.KindPerson:
			topic, key = topics.Persons, int64Key(key[:0], e.Person.ID)
			value, _ = nexmark.PersonSerde().Serialize(value[:0], e.Person)
		case nexmark.KindAuction:
			topic, key = topics.Auctions, int64Key(key[:0], e.Auction.ID)
			value, _ = nexmark.AuctionSerde().Serialize(value[:0], e.Auction)
		case nexmark.KindBid:
			topic, key = topics.Bids, int64Key(key[:0], e.Bid.Auction)
			value, _ = nexmark.BidSerde().Serialize(value[:0], e.Bid)
		}
		if !reads[topic] {
			return nil
		}
		return d.PipeRaw(topic, key, value, e.DateTime())
	}
	// A file sink (Query.Files) syncs its files at every commit: commit
	// once per 1,000 events for it, as the runtimes do, not per record.
	batch := int64(1)
	if q.Files != nil {
		batch = 1000
	}
	for start := int64(0); start < n; start += batch {
		err := d.Transaction(func() error {
			for i := start; i < min(n, start+batch); i++ {
				if err := one(i); err != nil {
					return fmt.Errorf("event %d: %w", i, err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	requireEnded(t, d, g)
	if q.Files != nil {
		var outs []output
		err := q.Files(out, func(key, value []byte) {
			outs = append(outs, output{key: append([]byte(nil), key...), value: append([]byte(nil), value...)})
		})
		if err != nil {
			t.Fatal(err)
		}
		return outs
	}
	recs, err := eddytest.Output(d, testOut, serde.Bytes(), serde.Bytes()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	outs := make([]output, len(recs))
	for i, r := range recs {
		outs[i] = output{key: r.Key, value: r.Value, ts: r.Timestamp}
	}
	return outs
}

// verify feeds outs to a new check of q and returns its verdict.
func verify(q Query, g *nexmark.Generator, n int64, outs []output) error {
	c := q.NewCheck(g, n)
	for _, o := range outs {
		c.Add(o.key, o.value, o.ts)
	}
	return c.Verify()
}

// corruption damages a query's output in a way its check must notice.
type corruption struct {
	name string
	fn   func(outs []output) []output
}

// dropOne and changeOne are corruptions every check must catch.
func dropOne(i func(n int) int) corruption {
	return corruption{"one record dropped", func(outs []output) []output {
		k := i(len(outs))
		return append(outs[:k:k], outs[k+1:]...)
	}}
}

// testQuery runs q over n events of a generator made from cfg, requires
// at least minOut outputs and its check to pass, then requires the check
// to fail on each corruption of the output.
func testQuery(t *testing.T, q Query, cfg nexmark.Config, n int64, minOut int, corruptions ...corruption) []output {
	t.Helper()
	g, err := nexmark.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	outs := run(t, q, g, n)
	if len(outs) < minOut {
		t.Fatalf("%s wrote %d records over %d events, want at least %d (a check over too little output proves little)", q.Name, len(outs), n, minOut)
	}
	if err := verify(q, g, n, outs); err != nil {
		t.Fatalf("%s over %d events: %v", q.Name, n, err)
	}
	for _, c := range corruptions {
		bad := c.fn(append([]output(nil), outs...))
		if err := verify(q, g, n, bad); err == nil {
			t.Errorf("%s: the check passed with %s", q.Name, c.name)
		} else {
			t.Logf("%s: %s: %v", q.Name, c.name, err)
		}
	}
	return outs
}

// withValue returns outs with record i's value replaced.
func withValue(outs []output, i int, value []byte) []output {
	outs[i].value = value
	return outs
}

// last returns the index of the last output with key k, or -1.
func last(outs []output, k int64) int {
	for i := len(outs) - 1; i >= 0; i-- {
		if len(outs[i].key) == 8 && int64(binary.BigEndian.Uint64(outs[i].key)) == k {
			return i
		}
	}
	return -1
}
