package nexmark

import (
	"context"
	"encoding/binary"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestProduce(t *testing.T) {
	topics := Topics{Persons: "p", Auctions: "a", Bids: "b"}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topics.Persons, topics.Auctions, topics.Bids))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	g := newGen(t, Config{Seed: 4})
	const n = 3000
	if err := g.Produce(ctx, cl, topics, n/2); err != nil {
		t.Fatal(err)
	}
	if err := g.ProduceRange(ctx, cl, topics, n/2, n); err != nil {
		t.Fatal(err)
	}

	// One partition per topic keeps each kind in index order.
	want := map[string][]Event{}
	for i := range int64(n) {
		e := g.Event(i)
		topic := map[Kind]string{KindPerson: topics.Persons, KindAuction: topics.Auctions, KindBid: topics.Bids}[e.Kind]
		want[topic] = append(want[topic], e)
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.ConsumeTopics(topics.Persons, topics.Auctions, topics.Bids),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	got := map[string][]Event{}
	for total := 0; total < n; {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("after %d records: %v", total, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			e, err := EventSerde().Deserialize(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			k := len(got[r.Topic])
			if k < len(want[r.Topic]) {
				w := want[r.Topic][k]
				var key int64
				switch w.Kind {
				case KindPerson:
					key = w.Person.ID
				case KindAuction:
					key = w.Auction.ID
				case KindBid:
					key = w.Bid.Auction
				}
				if int64(binary.BigEndian.Uint64(r.Key)) != key || r.Timestamp.UnixMilli() != w.DateTime() {
					t.Fatalf("%s record %d: key %x, timestamp %v; want %d, %d", r.Topic, k, r.Key, r.Timestamp, key, w.DateTime())
				}
			}
			got[r.Topic] = append(got[r.Topic], e)
			total++
		})
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("topics differ from the generated events (persons %d/%d auctions %d/%d bids %d/%d)",
			len(got["p"]), len(want["p"]), len(got["a"]), len(want["a"]), len(got["b"]), len(want["b"]))
	}
}

func TestProduceErrors(t *testing.T) {
	g := newGen(t, Config{})
	ctx := context.Background()
	if err := g.Produce(ctx, nil, Topics{}, 1); err == nil {
		t.Fatal("no topics accepted")
	}
	if err := g.ProduceRange(ctx, nil, DefaultTopics(), 5, 4); err == nil {
		t.Fatal("empty backwards range accepted")
	}
}
