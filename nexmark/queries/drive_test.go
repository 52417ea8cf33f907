package queries

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// testConfig slows event time to 100 events/s, so that a few tens of
// thousands of events span minutes and close several 10 s windows, with
// the default delays (up to 3 s).
var testConfig = nexmark.Config{Seed: 7, EventsPerSecond: 100, ProbDelayedEvent: 0.1}

const driveOut = "out"

// lateDelay is the longest delay within the windowed queries' grace
// (4 s): with it no record is late.
const lateDelay = 3 * time.Second

// lateConfig delays events by up to 20 s, beyond the windowed queries'
// grace and a session's gap: some records are late for every windowed
// query, and the checks must model their loss.
var lateConfig = nexmark.Config{Seed: 11, EventsPerSecond: 100, ProbDelayedEvent: 0.2, MaxDelay: 20 * time.Second}

// driveQuery runs q through eddytest over events [0, n) of g, in index
// order, piping each event whose topic in names (only those the query
// reads), and returns what it wrote to its output. before, if set, runs
// before each event is piped (to move the wall clock).
func driveQuery(t testing.TB, q Query, g *nexmark.Generator, n int64, in nexmark.Topics, before func(d *eddytest.Driver, i int64)) []eddy.Record[[]byte, []byte] {
	t.Helper()
	topo := eddy.NewTopology()
	q.Build(topo, in, driveOut)
	d, err := eddytest.New(topo, eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ev := nexmark.EventSerde()
	var key, value []byte
	for i := range n {
		if before != nil {
			before(d, i)
		}
		e := g.Event(i)
		var topic string
		var k int64
		switch e.Kind {
		case nexmark.KindPerson:
			topic, k = in.Persons, e.Person.ID
		case nexmark.KindAuction:
			topic, k = in.Auctions, e.Auction.ID
		case nexmark.KindBid:
			topic, k = in.Bids, e.Bid.Auction
		}
		if topic == "" {
			continue
		}
		key = binary.BigEndian.AppendUint64(key[:0], uint64(k))
		if value, err = ev.Serialize(value[:0], e); err != nil {
			t.Fatal(err)
		}
		if err := d.PipeRaw(topic, key, value, e.DateTime()); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	requireEnded(t, d, g)
	recs, err := eddytest.Output(d, driveOut, serde.Bytes(), serde.Bytes()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// requireEnded ends d's input, as the end of the generator's bounded
// events does (every window closes), and requires that no record was
// late unless g delays events beyond the grace.
func requireEnded(t testing.TB, d *eddytest.Driver, g *nexmark.Generator) {
	t.Helper()
	if err := d.EndOfInput(); err != nil {
		t.Fatal(err)
	}
	if cfg := g.Config(); cfg.ProbDelayedEvent > 0 && cfg.MaxDelay > lateDelay {
		t.Logf("%d records dropped as late (delays up to %v)", d.LateRecordsDropped(), cfg.MaxDelay)
	} else if late := d.LateRecordsDropped(); late != 0 {
		t.Errorf("%d records dropped as late; the generator's delays are within the grace", late)
	}
}

// verify feeds recs to a new check and verifies.
func verifyRecords(newCheck func() Check, recs []eddy.Record[[]byte, []byte]) error {
	c := newCheck()
	for _, r := range recs {
		c.Add(r.Key, r.Value, r.Timestamp)
	}
	return c.Verify()
}

// requireChecked requires the check to pass on recs and to fail when one
// record is dropped, duplicated or has its value changed: a check that
// cannot fail proves nothing.
func requireChecked(t *testing.T, newCheck func() Check, recs []eddy.Record[[]byte, []byte]) {
	t.Helper()
	requireCheckedDropping(t, newCheck, recs, len(recs)/2)
}

// requireCheckedDropping is requireChecked with the output dropped at
// index drop: a query whose output is a table of updates that the table
// cache may collapse (q12) cannot tell a dropped update from a collapsed
// one, only a dropped last one.
func requireCheckedDropping(t *testing.T, newCheck func() Check, recs []eddy.Record[[]byte, []byte], drop int) {
	t.Helper()
	if len(recs) < 10 {
		t.Fatalf("%d outputs: too few for a meaningful test", len(recs))
	}
	if err := verifyRecords(newCheck, recs); err != nil {
		t.Fatalf("check of the query's output: %v", err)
	}
	mid := len(recs) / 2
	dropped := append(append([]eddy.Record[[]byte, []byte](nil), recs[:drop]...), recs[drop+1:]...)
	duplicated := append(append([]eddy.Record[[]byte, []byte](nil), recs[:mid+1]...), recs[mid:]...)
	changed := append([]eddy.Record[[]byte, []byte](nil), recs...)
	v := bytes.Clone(changed[mid].Value)
	v[len(v)-1] ^= 1
	changed[mid].Value = v
	for name, wrong := range map[string][]eddy.Record[[]byte, []byte]{"dropped": dropped, "duplicated": duplicated, "changed": changed} {
		err := verifyRecords(newCheck, wrong)
		if err == nil {
			t.Errorf("check passed with one output %s", name)
		} else {
			t.Logf("one output %s: %v", name, err)
		}
	}
}

func testGenerator(t *testing.T) *nexmark.Generator {
	t.Helper()
	g, err := nexmark.New(testConfig)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
