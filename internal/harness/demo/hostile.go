package demo

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/kafka"
)

// Hostile makes a Generator write hostile records among its payments (issue
// 16): records the examples must refuse, each to the dead-letter topic
// exactly once at a known stage, and odd records they must process like any
// payment. Every Every-th record is hostile; the kinds come in a seeded
// order, each kind once per round. The expected outcome of each kind comes
// from the examples' documented rules (README "Bad records"), not from
// running them.
type Hostile struct {
	Every int
	// Long adds the costly kinds: a 1 MB and a 3 MB zstd-compressed
	// malformed payment, dead-lettered truncated.
	Long bool

	mu      sync.Mutex
	written []HostileRecord
	bad     atomic.Int64
}

// Stages of a dead letter (the eddy.stage header).
const (
	StageDecode  = "decode"
	StageTime    = "time"
	StageProcess = "process"
)

// HostileRecord is a hostile record the broker acknowledged, with what each
// example must do with it: Ledger and Windowed are the stage of its one
// dead letter, or "" when the app processes it as a payment (the windowed
// example may drop it as late, which its reference decides).
type HostileRecord struct {
	Kind      string
	Partition int32
	Offset    int64
	Ledger    string
	Windowed  string
	// Forged is set when the record carries its own eddy.error,
	// eddy.stage and eddy.offset headers (forgedOffset), which a dead
	// letter keeps renamed original.eddy.*.
	Forged bool
	// Truncated is set for a record too large to dead-letter whole.
	Truncated bool
}

// Bad reports whether some app must dead-letter the record.
func (r HostileRecord) Bad() bool { return r.Ledger != "" || r.Windowed != "" }

// Records are the hostile records acknowledged so far, in no fixed order.
func (h *Hostile) Records() []HostileRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]HostileRecord(nil), h.written...)
}

// BadCount is the number of acknowledged hostile records that some app
// must dead-letter.
func (h *Hostile) BadCount() int64 { return h.bad.Load() }

// forgedOffset is the eddy.offset a forged header claims.
const forgedOffset = "999"

// hostileOut is one record a kind writes and its expected outcome.
type hostileOut struct {
	rec               *kgo.Record
	ledger, windowed  string
	forged, truncated bool
	via               via
}

// via is the client a hostile record is written with.
type via int

const (
	viaStream via = iota // the generator's client, in order with the payments
	viaRaw               // a raw batch: a timestamp franz-go cannot write
	viaBig               // a record of a MB, uncompressed
	viaZstd              // a record of several MB, zstd-compressed
)

// hostileKind makes one hostile case.
type hostileKind struct {
	name string
	long bool
	make func(c *hostileRun, id string) []hostileOut
}

// both is the outcome in both examples: they share the key serde, the
// payment codec and the key check, and refuse an overflow of the balance
// (ledger) or of the window's sum (windowed), which the pair below makes the
// same.
func both(rec *kgo.Record, stage string) hostileOut {
	return hostileOut{rec: rec, ledger: stage, windowed: stage}
}

// hostileKinds are the cases; long adds the costly ones.
func hostileKinds(long bool) []hostileKind {
	payment := func(id, account string, amount int64) []byte {
		return fmt.Appendf(nil, `{"id":%q,"account":%q,"amount":%d}`, id, account, amount)
	}
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }
	kinds := []hostileKind{
		{name: "null value", make: func(c *hostileRun, id string) []hostileOut {
			return []hostileOut{both(&kgo.Record{Key: []byte(c.account())}, StageDecode)}
		}},
		{name: "garbage bytes", make: func(c *hostileRun, id string) []hostileOut {
			return []hostileOut{both(&kgo.Record{Key: []byte(c.account()), Value: []byte("\x00\x01garbage\xfe{")}, StageDecode)}
		}},
		{name: "random bytes", make: func(c *hostileRun, id string) []hostileOut {
			v := make([]byte, 1+c.rng.IntN(64))
			for i := range v {
				v[i] = byte(c.rng.UintN(256))
			}
			v[0] = 0xff // never JSON, whatever follows
			return []hostileOut{both(&kgo.Record{Key: []byte(c.account()), Value: v}, StageDecode)}
		}},
		{name: "wrong JSON types", make: func(c *hostileRun, id string) []hostileOut {
			a := c.account()
			v := fmt.Appendf(nil, `{"id":7,"account":%q,"amount":"12"}`, a)
			return []hostileOut{both(&kgo.Record{Key: []byte(a), Value: v}, StageDecode)}
		}},
		{name: "100,000-level nesting", make: func(c *hostileRun, id string) []hostileOut {
			a := c.account()
			v := fmt.Appendf(nil, `{"id":%q,"account":%q,"amount":1,"x":`, id, a)
			v = append(v, bytes.Repeat([]byte("["), 100_000)...)
			v = append(append(v, bytes.Repeat([]byte("]"), 100_000)...), '}')
			return []hostileOut{both(&kgo.Record{Key: []byte(a), Value: v}, StageDecode)}
		}},
		{name: "negative timestamp", make: func(c *hostileRun, id string) []hostileOut {
			a := c.account()
			return []hostileOut{both(&kgo.Record{Key: []byte(a), Value: payment(id, a, 5), Timestamp: at(-5000)}, StageTime)}
		}},
		{name: "timestamp 0", make: func(c *hostileRun, id string) []hostileOut {
			// The epoch is a time like any other: the ledger counts
			// it; the windowed example drops it as late.
			a := c.account()
			return []hostileOut{both(&kgo.Record{Key: []byte(a), Value: payment(id, a, 5), Timestamp: at(0)}, "")}
		}},
		{name: "year 2200", make: func(c *hostileRun, id string) []hostileOut {
			// Beyond the default MaxEventTimeAhead (24 h).
			a := c.account()
			ts := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
			return []hostileOut{both(&kgo.Record{Key: []byte(a), Value: payment(id, a, 5), Timestamp: ts}, StageTime)}
		}},
		{name: "past 2262", make: func(c *hostileRun, id string) []hostileOut {
			// Read by the Kafka client as another time: the year 3000
			// as a negative one, 2700 as 2115.
			a := c.account()
			year := 3000
			if c.rng.IntN(2) == 0 {
				year = 2700
			}
			ts := time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC)
			// time.Time holds the year; the raw batch takes its ms.
			out := both(&kgo.Record{Key: []byte(a), Value: payment(id, a, 5), Timestamp: ts}, StageTime)
			out.via = viaRaw
			return []hostileOut{out}
		}},
		{name: "forged headers, bad record", make: func(c *hostileRun, id string) []hostileOut {
			out := both(&kgo.Record{Key: []byte(c.account()), Value: []byte("not a payment"), Headers: forgedHeaders()}, StageDecode)
			out.forged = true
			return []hostileOut{out}
		}},
		{name: "forged headers, good record", make: func(c *hostileRun, id string) []hostileOut {
			a := c.account()
			out := both(&kgo.Record{Key: []byte(a), Value: payment(id, a, 5), Timestamp: c.eventTime(a), Headers: forgedHeaders()}, "")
			out.forged = true
			return []hostileOut{out}
		}},
		{name: "key differs from account", make: func(c *hostileRun, id string) []hostileOut {
			key, acct := c.account(), c.account()
			for acct == key {
				acct += "-other"
			}
			return []hostileOut{both(&kgo.Record{Key: []byte(key), Value: payment(id, acct, 5), Timestamp: c.eventTime(key)}, StageProcess)}
		}},
		{name: "null key", make: func(c *hostileRun, id string) []hostileOut {
			return []hostileOut{both(&kgo.Record{Value: payment(id, c.account(), 5)}, StageDecode)}
		}},
		{name: "empty key", make: func(c *hostileRun, id string) []hostileOut {
			return []hostileOut{both(&kgo.Record{Key: []byte{}, Value: payment(id, c.account(), 5)}, StageDecode)}
		}},
		{name: "invalid UTF-8 key", make: func(c *hostileRun, id string) []hostileOut {
			a := c.account() + "\xff"
			v := []byte(`{"id":"` + id + `","account":"` + a + `","amount":5}`)
			return []hostileOut{both(&kgo.Record{Key: []byte(a), Value: v}, StageDecode)}
		}},
		{name: "invalid UTF-8 account", make: func(c *hostileRun, id string) []hostileOut {
			a := c.account()
			v := []byte(`{"id":"` + id + `","account":"` + a + "\xc0" + `","amount":5}`)
			return []hostileOut{both(&kgo.Record{Key: []byte(a), Value: v}, StageDecode)}
		}},
		{name: "invalid UTF-8 id", make: func(c *hostileRun, id string) []hostileOut {
			a := c.account()
			v := []byte(`{"id":"` + id + "\xff" + `","account":"` + a + `","amount":5}`)
			return []hostileOut{both(&kgo.Record{Key: []byte(a), Value: v}, StageDecode)}
		}},
		{name: "lone surrogate", make: func(c *hostileRun, id string) []hostileOut {
			a := c.account()
			v := []byte(`{"id":"` + id + `\udfff","account":"` + a + `","amount":5}`)
			return []hostileOut{both(&kgo.Record{Key: []byte(a), Value: v}, StageDecode)}
		}},
		{name: "overflow pair", make: func(c *hostileRun, id string) []hostileOut {
			// An account of its own, and one time for both, so that
			// both payments are in its balance and in one window: the
			// first fits, the second would overflow an int64.
			a := "acct-overflow-" + id
			ts := c.eventTime(a)
			first := &kgo.Record{Key: []byte(a), Value: payment(id+"-1", a, math.MaxInt64-1000), Timestamp: ts}
			second := &kgo.Record{Key: []byte(a), Value: payment(id+"-2", a, 2000), Timestamp: ts}
			return []hostileOut{both(first, ""), both(second, StageProcess)}
		}},
		{name: "1 MB poison", long: true, make: func(c *hostileRun, id string) []hostileOut {
			out := both(&kgo.Record{Key: []byte(c.account()), Value: poisonValue(id, 1_000_100)}, StageDecode)
			out.truncated, out.via = true, viaBig
			return []hostileOut{out}
		}},
		{name: "3 MB zstd poison", long: true, make: func(c *hostileRun, id string) []hostileOut {
			out := both(&kgo.Record{Key: []byte(c.account()), Value: poisonValue(id, 3_000_000)}, StageDecode)
			out.truncated, out.via = true, viaZstd
			return []hostileOut{out}
		}},
	}
	if long {
		return kinds
	}
	var short []hostileKind
	for _, k := range kinds {
		if !k.long {
			short = append(short, k)
		}
	}
	return short
}

// HostileKinds is the number of hostile kinds a round holds.
func HostileKinds(long bool) int { return len(hostileKinds(long)) }

func forgedHeaders() []kgo.RecordHeader {
	return []kgo.RecordHeader{{Key: eddy.HeaderDLQError, Value: []byte("forged")}, {Key: eddy.HeaderDLQStage, Value: []byte("forged")},
		{Key: eddy.HeaderDLQOffset, Value: []byte(forgedOffset)}}
}

// poisonValue is an unterminated JSON string of size bytes: not a payment.
func poisonValue(id string, size int) []byte {
	v := fmt.Appendf(nil, `{"id":%q,"account":"acct-0","note":"`, id)
	return append(v, bytes.Repeat([]byte("x"), size)...)[:size]
}

// hostileRun is a Generator's hostile state during Run.
type hostileRun struct {
	g          *Generator
	h          *Hostile
	rng        *rand.Rand
	kinds      []hostileKind
	order      []int
	n          int
	partitions int32
	// partMax is the largest event time of the payments generated per
	// partition (by the key's partition): a hostile record stamped there
	// leaves its partition's stream time where the good payments put it,
	// so the windowed reference, computed from the good payments alone,
	// stays exact.
	partMax        map[int32]int64
	raw, big, zstd *kgo.Client
}

func (g *Generator) startHostile(ctx context.Context, cl *kgo.Client) (*hostileRun, error) {
	parts, err := kafka.Partitions(ctx, cl, g.Topic)
	if err != nil {
		return nil, fmt.Errorf("demo: hostile records: %w", err)
	}
	c := &hostileRun{g: g, h: g.Hostile, rng: rand.New(rand.NewPCG(g.Seed, 0x4057)), kinds: hostileKinds(g.Hostile.Long),
		partitions: parts[g.Topic], partMax: map[int32]int64{}}
	// Kafka 3.0's versions: produce requests name topics (from v13 they
	// carry topic ids).
	if c.raw, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(g.Seeds...), kgo.MaxVersions(kversion.V3_0_0())}, g.ClientOpts...)...); err != nil {
		return nil, fmt.Errorf("demo: hostile client: %w", err)
	}
	if g.Hostile.Long {
		// franz-go caps a batch before compression; the broker checks the
		// compressed batch against max.message.bytes (1,048,588), which
		// both poison pills pass.
		big := []kgo.Opt{kgo.SeedBrokers(g.Seeds...), kgo.DefaultProduceTopic(g.Topic), kgo.ProducerBatchMaxBytes(4 << 20)}
		if c.big, err = kgo.NewClient(append(append(big, kgo.ProducerBatchCompression(kgo.NoCompression())), g.ClientOpts...)...); err != nil {
			c.close()
			return nil, fmt.Errorf("demo: hostile client: %w", err)
		}
		if c.zstd, err = kgo.NewClient(append(append(big, kgo.ProducerBatchCompression(kgo.ZstdCompression())), g.ClientOpts...)...); err != nil {
			c.close()
			return nil, fmt.Errorf("demo: hostile client: %w", err)
		}
	}
	return c, nil
}

func (c *hostileRun) close() {
	for _, cl := range []*kgo.Client{c.raw, c.big, c.zstd} {
		if cl != nil {
			cl.Close()
		}
	}
}

// note keeps the event time of a generated payment.
func (c *hostileRun) note(r *kgo.Record) {
	if c.g.Events == nil || r.Timestamp.IsZero() {
		return
	}
	p := kafka.KeyPartition(r.Key, c.partitions)
	if ts, ok := c.partMax[p]; !ok || r.Timestamp.UnixMilli() > ts {
		c.partMax[p] = r.Timestamp.UnixMilli()
	}
}

// account is one of the generator's accounts.
func (c *hostileRun) account() string {
	return fmt.Sprintf("acct-%04d", c.rng.IntN(max(c.g.Accounts, 1)))
}

// eventTime is the time of a record keyed key that the examples process:
// its partition's latest event time, which moves no stream time (zero, the
// producer's clock, without event times).
func (c *hostileRun) eventTime(key string) time.Time {
	e := c.g.Events
	if e == nil {
		return time.Time{}
	}
	p := kafka.KeyPartition([]byte(key), c.partitions)
	ts, ok := c.partMax[p]
	if !ok {
		// No payment on the partition yet: the generator's clock,
		// which its next payments do not go below when in order.
		ts = e.Start + int64(float64(c.n)*e.Step)
		c.partMax[p] = ts
	}
	return time.UnixMilli(ts)
}

// write writes the next hostile kind. Records written by cl keep their
// order with the payments; the others are written at once.
func (c *hostileRun) write(ctx context.Context, cl *kgo.Client) error {
	if len(c.order) == 0 {
		c.order = c.rng.Perm(len(c.kinds))
	}
	k := c.kinds[c.order[0]]
	c.order = c.order[1:]
	id := fmt.Sprintf("h%d", c.n)
	c.n++
	for _, out := range k.make(c, id) {
		out.rec.Topic = c.g.Topic
		var err error
		switch out.via {
		case viaRaw:
			err = c.produceRaw(ctx, out.rec)
			c.ack(k.name, out, err)
		case viaBig:
			err = c.big.ProduceSync(ctx, out.rec).FirstErr()
			c.ack(k.name, out, err)
		case viaZstd:
			err = c.zstd.ProduceSync(ctx, out.rec).FirstErr()
			c.ack(k.name, out, err)
		default:
			cl.Produce(context.Background(), out.rec, func(_ *kgo.Record, err error) { c.ack(k.name, out, err) })
		}
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("demo: write the hostile record %q: %w", k.name, err)
		}
	}
	return nil
}

// ack records an acknowledged hostile record.
func (c *hostileRun) ack(kind string, out hostileOut, err error) {
	if err != nil {
		c.g.failed.Add(1)
		return
	}
	c.g.produced.Add(1)
	r := HostileRecord{Kind: kind, Partition: out.rec.Partition, Offset: out.rec.Offset, Ledger: out.ledger, Windowed: out.windowed,
		Forged: out.forged, Truncated: out.truncated}
	if r.Bad() {
		c.h.bad.Add(1)
	}
	c.h.mu.Lock()
	c.h.written = append(c.h.written, r)
	c.h.mu.Unlock()
}

// produceRaw writes r as a record batch of its own, to its key's
// partition, with r.Timestamp's milliseconds as they are: franz-go's
// producer cannot write a time past 2262 (it goes through an int64 of
// nanoseconds), another client can. It sets r's partition and offset.
func (c *hostileRun) produceRaw(ctx context.Context, r *kgo.Record) error {
	ts := r.Timestamp.Unix()*1000 + int64(r.Timestamp.Nanosecond()/1e6)
	rec := kmsg.Record{Key: r.Key, Value: r.Value}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1) // what follows the length, a one-byte varint of 0 here
	batch := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, FirstTimestamp: ts, MaxTimestamp: ts,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: rec.AppendTo(nil),
	}
	raw := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))                                          // Length: what follows it
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))) // CRC: from the attributes on
	r.Partition = kafka.KeyPartition(r.Key, c.partitions)
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10_000
	part := kmsg.NewProduceRequestTopicPartition()
	part.Partition, part.Records = r.Partition, raw
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.Partitions = r.Topic, []kmsg.ProduceRequestTopicPartition{part}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	resp, err := req.RequestWith(ctx, c.raw)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return err
			}
			r.Offset = p.BaseOffset
			return nil
		}
	}
	return fmt.Errorf("demo: no answer for %s/%d", r.Topic, r.Partition)
}

// GoodFor drops from payments the hostile records app must dead-letter,
// found by partition and offset: what remains are the records app
// processes, the input of its reference (verify.Ledger, verify.Windowed).
func GoodFor(app string, payments []*kgo.Record, hostile []HostileRecord) []*kgo.Record {
	bad := map[[2]int64]bool{}
	for _, h := range hostile {
		if h.outcome(app) != "" {
			bad[[2]int64{int64(h.Partition), h.Offset}] = true
		}
	}
	var good []*kgo.Record
	for _, r := range payments {
		if !bad[[2]int64{int64(r.Partition), r.Offset}] {
			good = append(good, r)
		}
	}
	return good
}

// Names of the apps, as HostileRecord's outcomes and CheckHostile know them.
const (
	AppLedger   = "ledger"
	AppWindowed = "windowed"
)

func (r HostileRecord) outcome(app string) string {
	if app == AppWindowed {
		return r.Windowed
	}
	return r.Ledger
}

// Producers maps the producer ids of an app's output records to the app:
// both examples write their dead letters to the same topic, and each app's
// transactional producer has one id per transactional id (its epoch, not
// its id, changes on a restart), so the id tells whose a dead letter is.
func Producers(into map[int64]string, app string, outputs []*kgo.Record) {
	for _, r := range outputs {
		into[r.ProducerID] = app
	}
}

// HostileReport says whether each hostile record had its expected outcome
// in each app: one dead letter at the expected stage for a bad record, none
// for a good one.
type HostileReport struct {
	Records, Bad int // hostile records written; those some app must refuse
	// DeadLetters are the dead letters of hostile records; Other the dead
	// letters of no hostile record (the generator's malformed payments).
	DeadLetters, Other int
	// Problems counts the missing, duplicated, unexpected and
	// wrongly-marked dead letters; Examples describe the first ones.
	Problems int
	Examples []string
	// Kinds counts the hostile records per kind.
	Kinds map[string]int
}

// OK reports whether every hostile record had its outcome.
func (r HostileReport) OK() bool { return r.Problems == 0 }

func (r HostileReport) String() string {
	return fmt.Sprintf("hostile records %d (bad %d), their dead letters %d, other dead letters %d, problems %d",
		r.Records, r.Bad, r.DeadLetters, r.Other, r.Problems)
}

func (r *HostileReport) problem(format string, args ...any) {
	r.Problems++
	if len(r.Examples) < 10 {
		r.Examples = append(r.Examples, fmt.Sprintf(format, args...))
	}
}

// CheckHostile checks the dead letters of topic's hostile records, for the
// apps that ran; producers maps a dead letter's producer id to its app.
// Each dead letter must name its source (eddy.topic, eddy.partition and
// exactly one eddy.offset, the true one, even when the record forged its
// own) and say the expected eddy.stage.
func CheckHostile(topic string, hostile []HostileRecord, dead []*kgo.Record, producers map[int64]string, apps []string) HostileReport {
	rep := HostileReport{Records: len(hostile), Kinds: map[string]int{}}
	type source struct {
		partition int32
		offset    int64
	}
	index := map[source]int{}
	for i, h := range hostile {
		index[source{h.Partition, h.Offset}] = i
		rep.Kinds[h.Kind]++
		if h.Bad() {
			rep.Bad++
		}
	}
	type seenKey struct {
		i   int
		app string
	}
	seen := map[seenKey]int{}
	for _, d := range dead {
		var offsets []string
		var part, top, stage, original string
		for _, h := range d.Headers {
			switch h.Key {
			case eddy.HeaderDLQOffset:
				offsets = append(offsets, string(h.Value))
			case eddy.HeaderDLQPartition:
				part = string(h.Value)
			case eddy.HeaderDLQTopic:
				top = string(h.Value)
			case eddy.HeaderDLQStage:
				stage = string(h.Value)
			case eddy.HeaderDLQOriginalPrefix + eddy.HeaderDLQOffset:
				original = string(h.Value)
			}
		}
		var src source
		_, err1 := fmt.Sscan(part, &src.partition)
		var err2 error
		if len(offsets) == 1 {
			_, err2 = fmt.Sscan(offsets[0], &src.offset)
		}
		i, ok := index[src]
		if len(offsets) != 1 || err1 != nil || err2 != nil || top != topic || !ok {
			if len(offsets) != 1 {
				rep.problem("dead letter %d@%d has %d eddy.offset headers, want 1", d.Partition, d.Offset, len(offsets))
			}
			rep.Other++
			continue
		}
		rep.DeadLetters++
		h := hostile[i]
		app := producers[d.ProducerID]
		if app == "" {
			rep.problem("%s (%d@%d): a dead letter from producer %d, which wrote no output of any app", h.Kind, h.Partition, h.Offset, d.ProducerID)
			continue
		}
		seen[seenKey{i, app}]++
		want := h.outcome(app)
		switch {
		case want == "":
			rep.problem("%s (%d@%d): the %s dead-lettered it (stage %s); it is a good record", h.Kind, h.Partition, h.Offset, app, stage)
		case stage != want:
			rep.problem("%s (%d@%d): the %s's dead letter says stage %q, want %q", h.Kind, h.Partition, h.Offset, app, stage, want)
		case h.Forged && original != forgedOffset:
			rep.problem("%s (%d@%d): the %s's dead letter lost the forged offset (original.eddy.offset %q)", h.Kind, h.Partition, h.Offset, app, original)
		case h.Truncated && !strings.Contains(headerValue(d, eddy.HeaderDLQTruncated), "value"):
			rep.problem("%s (%d@%d): the %s's dead letter is not marked truncated", h.Kind, h.Partition, h.Offset, app)
		}
	}
	for i, h := range hostile {
		for _, app := range apps {
			n := seen[seenKey{i, app}]
			if want := h.outcome(app); want != "" && n != 1 {
				rep.problem("%s (%d@%d): %d dead letters from the %s, want 1", h.Kind, h.Partition, h.Offset, n, app)
			}
		}
	}
	return rep
}

func headerValue(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// KindList lists the kinds written and how many of each.
func (r HostileReport) KindList() string {
	var s []string
	for _, k := range hostileKinds(true) {
		if n := r.Kinds[k.name]; n > 0 {
			s = append(s, fmt.Sprintf("%s ×%d", k.name, n))
		}
	}
	return strings.Join(s, ", ")
}
