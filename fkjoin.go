package eddy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/serde"
)

// JoinTablesOnForeignKey joins each row of left with the row of right
// whose key is the row's foreign key, fk(key, row): Kafka Streams'
// foreign-key table join (KIP-213), e.g. orders keyed by order id with
// the customer each names. The tables need not be co-partitioned: the
// left side subscribes each row to its foreign key through the topic
// "<app-id>-<name>-subscription-repartition", keyed by the foreign key
// and so partitioned like right; the right side keeps the subscriptions
// in the store "<name>-subscriptions" and answers each subscription, and
// each update of a right row to every row subscribed to it, through
// "<app-id>-<name>-response-repartition", sized like left, on the
// partition each subscribing row was read from. (The right table's topic
// must be partitioned by its key with Config.Partitioner, as for any
// join; the left table's need not.) The left side keeps each
// row's current foreign key in the store "<name>-foreign-keys", to
// unsubscribe the row when its foreign key changes or the row goes, so
// that the old right row's updates no longer reach it. name keeps these
// topics and stores when the topology changes around the join.
//
// kind is InnerJoin or LeftJoin (OuterJoin is refused: Kafka Streams has
// none either). The result is a table of updates keyed by the left key,
// joiner(key, left row, right row, rok), with the timestamp of the update
// that caused it: rok is false only in a LeftJoin whose row has no right
// row. In an InnerJoin a left row without a right row gives a tombstone,
// which removes its previous result if it had one. A left tombstone gives
// a tombstone; a right update updates the result of every left row that
// references it, and a right tombstone turns those into tombstones
// (InnerJoin) or rok=false results (LeftJoin). An fk that returns KO's
// zero value (compared by its encoding: "" for a string key, 0 for an
// integer) means the row references nothing, Kafka Streams' null foreign
// key: a LeftJoin result with rok=false, an InnerJoin tombstone.
//
// Answers race with updates of the left row: each carries a hash of the
// left row it answers, and one whose row has changed since (an update,
// or a foreign key change, in flight) is dropped, as the current row's
// own answer follows. So a left row updated faster than its answers come
// back gives a result only for its latest value, and once the topics are
// drained each left key's last result is the join of the current rows.
//
// Both tables must have a store of their own (TableFrom, an aggregation,
// or Materialize): their serdes encode keys, foreign keys and rows, and
// the join compares those bytes (subscriptions are found by the foreign
// key's, answers checked by a hash of the row's). So the serdes must give
// the same bytes for the same value across deploys: a serde that frames
// its output with a schema registry id (serde/avro) changes them when the
// writer schema changes, and answers in flight, and subscriptions made
// before, would be lost (Kafka Streams has the same limit, KAFKA-15303).
// Like
// JoinTables, the result has no store: give it one with MapTableValues
// or FilterTable and Materialize.
func JoinTablesOnForeignKey[K, VL, KO, VR, VO any](left Table[K, VL], right Table[KO, VR], name string,
	fk func(key K, l VL) KO, kind JoinKind, joiner func(key K, l VL, r VR, rok bool) VO) Table[K, VO] {
	t := left.t
	const op = "JoinTablesOnForeignKey"
	ok := true
	check := func(err error) {
		if err != nil {
			t.failOn(op, left.n, "%w", err)
			ok = false
		}
	}
	check(joinable("left", left))
	check(joinable("right", right))
	check(ownStore("left", left))
	check(ownStore("right", right))
	if right.t != t {
		check(fmt.Errorf("eddy: its tables belong to different topologies; build them in one"))
	}
	if kind != InnerJoin && kind != LeftJoin {
		check(fmt.Errorf("eddy: a foreign-key join is inner or left, not %s", kind))
	}
	if !ok {
		return Table[K, VO]{t: t, n: t.add("fk-join-"+name, left.n)}
	}
	j := &fkJoin[K, VL, KO, VR, VO]{
		name: name, fk: fk, kind: kind, joiner: joiner,
		keys: left.rows.keys, lvalues: left.rows.values, fkeys: right.rows.keys, rvalues: right.rows.values,
		left: left.rows, right: right.rows,
	}

	// Left side: subscribe each row to its foreign key.
	send := t.add("fk-join-"+name+"-subscribe", left.n)
	foreignKeys := NewKeyValueStoreSpec(name+"-foreign-keys", j.keys, serde.Bytes())
	t.addStore(foreignKeys.name, send, 0, foreignKeys)
	send.build = func(b *taskBuild) error {
		out := &emitter[[]byte, []byte]{}
		b.out[send] = out
		buf, err := b.tc.Store(foreignKeys.name)
		if err != nil {
			return err
		}
		// Task p reads partition p of the left table's topic: the
		// answers come back to it.
		s := &fkSender[K, VL, KO, VR, VO]{j: j, out: out, fks: foreignKeys.view(buf, b.tc.StreamTime), partition: b.tc.ID().Partition}
		if s.zero, err = j.zeroKey(); err != nil {
			return err
		}
		in := output[K, VL](b, left.n)
		in.children = append(in.children, receiverFunc[K, VL](s.receive))
		return nil
	}
	subs := Repartition(Stream[[]byte, []byte]{t: t, n: send}, name+"-subscription", serde.Bytes(), serde.Bytes())

	// Right side: keep the subscriptions, answer them and the right
	// table's updates.
	answer := t.add("fk-join-"+name+"-subscriptions", subs.n, right.n)
	subStore := NewKeyValueStoreSpec(name+"-subscriptions", serde.Bytes(), serde.Bytes())
	t.addStore(subStore.name, answer, 0, subStore)
	answer.build = func(b *taskBuild) error {
		out := &emitter[int32, []byte]{}
		b.out[answer] = out
		buf, err := b.tc.Store(subStore.name)
		if err != nil {
			return err
		}
		rows, err := j.right.open(b)
		if err != nil {
			return err
		}
		a := &fkAnswerer[K, VL, KO, VR, VO]{j: j, out: out, subs: buf, rows: rows}
		in := output[[]byte, []byte](b, subs.n)
		in.children = append(in.children, receiverFunc[[]byte, []byte](a.subscription))
		rin := output[KO, VR](b, right.n)
		rin.children = append(rin.children, receiverFunc[KO, VR](a.update))
		return nil
	}
	responses := answerTopic(t, answer, name+"-response")
	if responses == nil {
		return Table[K, VO]{t: t, n: t.add("fk-join-"+name, left.n)}
	}

	// Left side again: join the responses that answer the current rows,
	// and the rows that reference nothing.
	n := t.add("fk-join-"+name, responses, left.n)
	n.build = func(b *taskBuild) error {
		out := &emitter[K, VO]{}
		b.out[n] = out
		rows, err := j.left.open(b)
		if err != nil {
			return err
		}
		r := &fkResponder[K, VL, KO, VR, VO]{j: j, out: out, rows: rows}
		if r.zero, err = j.zeroKey(); err != nil {
			return err
		}
		in := output[[]byte, []byte](b, responses)
		in.children = append(in.children, receiverFunc[[]byte, []byte](r.response))
		lin := output[K, VL](b, left.n)
		lin.children = append(lin.children, receiverFunc[K, VL](r.row))
		return nil
	}
	return Table[K, VO]{t: t, n: n}
}

// ownStore checks that a foreign-key join's table has a store of its own,
// whose serdes encode its rows (a view's store holds its parent's).
func ownStore[K, V any](side string, tb Table[K, V]) error {
	if tb.rows != nil && tb.rows.values == nil {
		return fmt.Errorf("eddy: the %s table of a foreign-key join is a FilterTable or MapTableValues view without a store of its own; give it one with eddy.Materialize", side)
	}
	return nil
}

// fkJoin is what the three parts of a foreign-key join share.
type fkJoin[K, VL, KO, VR, VO any] struct {
	name    string
	fk      func(K, VL) KO
	kind    JoinKind
	joiner  func(K, VL, VR, bool) VO
	keys    serde.Serde[K]
	lvalues serde.Serde[VL]
	fkeys   serde.Serde[KO]
	rvalues serde.Serde[VR]
	left    *tableRows[K, VL]
	right   *tableRows[KO, VR]
}

// zeroKey is the encoding of KO's zero value: a foreign key that
// references nothing.
func (j *fkJoin[K, VL, KO, VR, VO]) zeroKey() ([]byte, error) {
	var zero KO
	b, err := j.fkeys.Serialize(nil, zero)
	if err != nil {
		return nil, fmt.Errorf("eddy: foreign-key join %s: encode the zero foreign key: %w", j.name, err)
	}
	return b, nil
}

// foreignKey encodes the foreign key of row v of key k into dst.
func (j *fkJoin[K, VL, KO, VR, VO]) foreignKey(dst []byte, k K, v VL) ([]byte, error) {
	b, err := j.fkeys.Serialize(dst, j.fk(k, v))
	if err != nil {
		return nil, fmt.Errorf("eddy: foreign-key join %s: encode foreign key: %w", j.name, err)
	}
	return b, nil
}

// hashRow is the hash of a left row's encoding that subscriptions and
// responses carry, to tell a response to the current row from a stale one.
func (j *fkJoin[K, VL, KO, VR, VO]) hashRow(buf []byte, v VL) ([]byte, [rowHashLen]byte, error) {
	var sum [rowHashLen]byte
	buf, err := j.lvalues.Serialize(buf[:0], v)
	if err != nil {
		return buf, sum, fmt.Errorf("eddy: foreign-key join %s: encode left row: %w", j.name, err)
	}
	h := fnv.New128a()
	h.Write(buf)
	h.Sum(sum[:0])
	return buf, sum, nil
}

// rowHashLen is the size of a row hash: 128 bits, as Kafka Streams' murmur3
// hash, make a collision (a stale response taken for the current one)
// negligible.
const rowHashLen = 16

// The subscription and response records. A subscription is keyed by the
// encoded foreign key, so it lands on the partition of the right row (as
// a record of the right table's topic, by Config.Partitioner); its value
// is a version byte (0), the instruction, the row hash, the partition of
// the left row (4 bytes, big-endian) and the encoded left key. The
// subscription store keeps the hash and the partition. A response goes
// to the partition of the left row that subscribed, explicitly, so it
// meets the row whatever partitioner wrote the left table's topic (Kafka
// Streams carries the partition too); it has no key (the partition guard
// checks none), and its value is a version byte, 1 when a right row
// follows (0 for none), the row hash, the length of the encoded left key
// (uvarint), the key, then the encoded right row.
const (
	fkVersion     = 0
	fkSubscribe   = 1 // keep the subscription and answer it
	fkUnsubscribe = 2 // drop the subscription: the row's foreign key changed or the row went
	// fkSubscriber is a subscription store value: row hash, partition.
	fkSubscriber = rowHashLen + 4
	fkSubHeader  = 2 + fkSubscriber
	fkRespHeader = 2 + rowHashLen
)

// answerTopic adds the response topic of a foreign-key join: a sink after
// answer that writes each response to the partition its record's key
// names, and the source that reads the topic back, returned (nil when the
// name is refused). It is declared like Repartition's topics, so Run
// creates and sizes it (like the left table's topic it is read with) and
// purges it.
func answerTopic(t *Topology, answer *node, name string) *node {
	topic, ok := declareRepartition(t, name)
	if !ok {
		return nil
	}
	sink := t.add("sink-"+topic, answer)
	t.writers[sink] = topic
	t.addressed[topic] = true
	sink.build = func(b *taskBuild) error {
		real := topicName(b.cfg.AppID, topic)
		var hs []kgo.RecordHeader // reused: the runtime copies what it is given
		in := output[int32, []byte](b, answer)
		in.children = append(in.children, receiverFunc[int32, []byte](func(r Record[int32, []byte]) error {
			hs = hs[:0]
			for _, h := range r.Headers {
				hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
			}
			return b.tc.ProduceTo(real, r.Key, nil, r.Value, r.Timestamp, hs)
		}))
		return nil
	}
	return source(t, topic, serde.Bytes(), serde.Bytes()).n
}

// fkSender is a task's left side: it subscribes each left row to its
// foreign key and unsubscribes it from the previous one.
type fkSender[K, VL, KO, VR, VO any] struct {
	j    *fkJoin[K, VL, KO, VR, VO]
	out  *emitter[[]byte, []byte]
	fks  *KeyValueStore[K, []byte]
	zero []byte
	kbuf []byte // the left key's encoding, reused
	fbuf []byte // the foreign key's encoding, reused
	vbuf []byte // the left row's encoding, reused
	sbuf []byte // the subscription's encoding, reused
	// partition is the task's: that of the left rows it reads.
	partition int32
}

func (s *fkSender[K, VL, KO, VR, VO]) receive(r Record[K, VL]) error {
	old, hadOld, err := s.fks.Get(r.Key)
	if err != nil {
		return err
	}
	var sum [rowHashLen]byte
	subscribe := !r.Tombstone
	if subscribe {
		if s.fbuf, err = s.j.foreignKey(s.fbuf[:0], r.Key, r.Value); err != nil {
			return err
		}
		subscribe = !bytes.Equal(s.fbuf, s.zero)
	}
	if subscribe {
		if s.vbuf, sum, err = s.j.hashRow(s.vbuf, r.Value); err != nil {
			return err
		}
	}
	if s.kbuf, err = s.j.keys.Serialize(s.kbuf[:0], r.Key); err != nil {
		return fmt.Errorf("eddy: foreign-key join %s: encode left key: %w", s.j.name, err)
	}
	if hadOld && (!subscribe || !bytes.Equal(old, s.fbuf)) {
		// The new subscription, if any, may go to another partition:
		// the old one must be dropped explicitly. (The hash would drop
		// its answers anyway; unsubscribing keeps them from being sent,
		// and the store from keeping every foreign key a row ever had.)
		if err := s.emit(old, fkUnsubscribe, sum, r); err != nil {
			return err
		}
	}
	if !subscribe {
		if !hadOld {
			return nil
		}
		return s.fks.Delete(r.Key)
	}
	if !hadOld || !bytes.Equal(old, s.fbuf) {
		if err := s.fks.Put(r.Key, s.fbuf); err != nil {
			return err
		}
	}
	// Every update subscribes again, even to the same foreign key: the
	// answer joins the new row, and replaces any answer in flight for
	// the old one (which the hash makes stale).
	return s.emit(s.fbuf, fkSubscribe, sum, r)
}

func (s *fkSender[K, VL, KO, VR, VO]) emit(fk []byte, instruction byte, sum [rowHashLen]byte, r Record[K, VL]) error {
	s.sbuf = append(s.sbuf[:0], fkVersion, instruction)
	s.sbuf = append(s.sbuf, sum[:]...)
	s.sbuf = binary.BigEndian.AppendUint32(s.sbuf, uint32(s.partition))
	s.sbuf = append(s.sbuf, s.kbuf...)
	return s.out.emit(Record[[]byte, []byte]{Key: fk, Value: s.sbuf, Timestamp: r.Timestamp, Headers: r.Headers})
}

// fkAnswerer is a task's right side: it keeps the subscriptions of its
// partition's foreign keys, keyed by (foreign key, left key) so that an
// update of a right row finds its subscribers by a prefix scan, and
// answers each subscription and each update.
type fkAnswerer[K, VL, KO, VR, VO any] struct {
	j    *fkJoin[K, VL, KO, VR, VO]
	out  *emitter[int32, []byte] // responses, keyed by the partition they go to
	subs subscriptionBuffer
	rows rowReader[KO, VR]
	key  []byte // a subscription's store key, reused
	fbuf []byte // the right key's encoding, reused
	vbuf []byte // the right row's encoding, reused
	rbuf []byte // the response's encoding, reused
}

// subscriptionBuffer is what fkAnswerer needs of its store's buffer.
type subscriptionBuffer interface {
	Get(key []byte) ([]byte, bool, error)
	Put(key, value []byte)
	Delete(key []byte)
	PrefixScan(prefix []byte, fn func(key, value []byte) error) error
}

// subscriptionKey is the store key of a subscription: the foreign key's
// length (uvarint), the foreign key, then the left key, so that the
// subscriptions of one foreign key share a prefix no other key has.
func subscriptionKey(dst, fk, leftKey []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(fk)))
	dst = append(dst, fk...)
	return append(dst, leftKey...)
}

func (a *fkAnswerer[K, VL, KO, VR, VO]) subscription(r Record[[]byte, []byte]) error {
	if len(r.Value) < fkSubHeader || r.Value[0] != fkVersion {
		return fmt.Errorf("eddy: foreign-key join %s: subscription of %d bytes is corrupt", a.j.name, len(r.Value))
	}
	instruction, subscriber, leftKey := r.Value[1], r.Value[2:fkSubHeader], r.Value[fkSubHeader:]
	a.key = subscriptionKey(a.key[:0], r.Key, leftKey)
	switch instruction {
	case fkUnsubscribe:
		a.subs.Delete(a.key)
		return nil
	case fkSubscribe:
		a.subs.Put(a.key, subscriber)
	default:
		return fmt.Errorf("eddy: foreign-key join %s: subscription with unknown instruction %d", a.j.name, instruction)
	}
	fk, err := a.j.fkeys.Deserialize(r.Key)
	if err != nil {
		return fmt.Errorf("eddy: foreign-key join %s: decode foreign key: %w", a.j.name, err)
	}
	v, found, err := a.rows.Get(fk)
	if err != nil {
		return err
	}
	if found {
		if a.vbuf, err = a.j.rvalues.Serialize(a.vbuf[:0], v); err != nil {
			return fmt.Errorf("eddy: foreign-key join %s: encode right row: %w", a.j.name, err)
		}
	}
	return a.respond(leftKey, subscriber, found, r.Timestamp, r.Headers)
}

// update answers every subscriber of a right row that changed or went.
func (a *fkAnswerer[K, VL, KO, VR, VO]) update(r Record[KO, VR]) error {
	var err error
	if a.fbuf, err = a.j.fkeys.Serialize(a.fbuf[:0], r.Key); err != nil {
		return fmt.Errorf("eddy: foreign-key join %s: encode right key: %w", a.j.name, err)
	}
	if !r.Tombstone {
		if a.vbuf, err = a.j.rvalues.Serialize(a.vbuf[:0], r.Value); err != nil {
			return fmt.Errorf("eddy: foreign-key join %s: encode right row: %w", a.j.name, err)
		}
	}
	prefix := subscriptionKey(nil, a.fbuf, nil)
	return a.subs.PrefixScan(prefix, func(key, subscriber []byte) error {
		return a.respond(key[len(prefix):], subscriber, !r.Tombstone, r.Timestamp, r.Headers)
	})
}

// respond answers leftKey's subscription (subscriber: its row hash and
// partition) with the right row in vbuf, if found.
func (a *fkAnswerer[K, VL, KO, VR, VO]) respond(leftKey, subscriber []byte, found bool, ts int64, hs []Header) error {
	if len(subscriber) != fkSubscriber {
		return fmt.Errorf("eddy: foreign-key join %s: subscription of %d bytes is corrupt", a.j.name, len(subscriber))
	}
	flag := byte(0)
	if found {
		flag = 1
	}
	a.rbuf = append(a.rbuf[:0], fkVersion, flag)
	a.rbuf = append(a.rbuf, subscriber[:rowHashLen]...)
	a.rbuf = binary.AppendUvarint(a.rbuf, uint64(len(leftKey)))
	a.rbuf = append(a.rbuf, leftKey...)
	if found {
		a.rbuf = append(a.rbuf, a.vbuf...)
	}
	partition := int32(binary.BigEndian.Uint32(subscriber[rowHashLen:]))
	return a.out.emit(Record[int32, []byte]{Key: partition, Value: a.rbuf, Timestamp: ts, Headers: hs})
}

// fkResponder is a task's left side again: it joins the responses that
// answer the current left rows, and gives the results of the rows that
// reference nothing at once.
type fkResponder[K, VL, KO, VR, VO any] struct {
	j    *fkJoin[K, VL, KO, VR, VO]
	out  *emitter[K, VO]
	rows rowReader[K, VL]
	zero []byte
	fbuf []byte // a foreign key's encoding, reused
	vbuf []byte // a left row's encoding, reused
}

// row gives the result of a left update that no response will answer: a
// tombstone, or a row whose foreign key references nothing.
func (p *fkResponder[K, VL, KO, VR, VO]) row(r Record[K, VL]) error {
	if !r.Tombstone {
		var err error
		if p.fbuf, err = p.j.foreignKey(p.fbuf[:0], r.Key, r.Value); err != nil {
			return err
		}
		if !bytes.Equal(p.fbuf, p.zero) {
			return nil // its subscription's response gives the result
		}
	}
	var zero VR
	return p.result(r.Key, r.Value, !r.Tombstone, zero, false, r.Timestamp, r.Headers)
}

func (p *fkResponder[K, VL, KO, VR, VO]) response(r Record[[]byte, []byte]) error {
	b := r.Value
	if len(b) < fkRespHeader || b[0] != fkVersion || b[1] > 1 {
		return fmt.Errorf("eddy: foreign-key join %s: response of %d bytes is corrupt", p.j.name, len(b))
	}
	sum := b[2:fkRespHeader]
	n, w := binary.Uvarint(b[fkRespHeader:])
	if w <= 0 || uint64(len(b)-fkRespHeader-w) < n {
		return fmt.Errorf("eddy: foreign-key join %s: response of %d bytes is corrupt", p.j.name, len(b))
	}
	leftKey := b[fkRespHeader+w : fkRespHeader+w+int(n)]
	rightRow := b[fkRespHeader+w+int(n):]
	k, err := p.j.keys.Deserialize(leftKey)
	if err != nil {
		return fmt.Errorf("eddy: foreign-key join %s: decode left key: %w", p.j.name, err)
	}
	l, ok, err := p.rows.Get(k)
	if err != nil || !ok {
		return err // the row went since: its tombstone was the result
	}
	var current [rowHashLen]byte
	if p.vbuf, current, err = p.j.hashRow(p.vbuf, l); err != nil {
		return err
	}
	if !bytes.Equal(current[:], sum) {
		return nil // it answers an older row: the current row's response follows
	}
	var v VR
	found := b[1] == 1
	if found {
		if v, err = p.j.rvalues.Deserialize(rightRow); err != nil {
			return fmt.Errorf("eddy: foreign-key join %s: decode right row: %w", p.j.name, err)
		}
	}
	return p.result(k, l, true, v, found, r.Timestamp, r.Headers)
}

// result emits the join of left row l (lok false: the row went) with right
// row v (found false: none), or a tombstone when the kind gives none.
func (p *fkResponder[K, VL, KO, VR, VO]) result(k K, l VL, lok bool, v VR, found bool, ts int64, hs []Header) error {
	if !lok || (!found && p.j.kind == InnerJoin) {
		return p.out.emit(Record[K, VO]{Key: k, Timestamp: ts, Tombstone: true, Headers: hs})
	}
	return p.out.emit(Record[K, VO]{Key: k, Value: p.j.joiner(k, l, v, found), Timestamp: ts, Headers: hs})
}
