package demo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/harness/verify"
)

// poisonPill is a malformed payment too large to dead-letter whole.
type poisonPill struct {
	name      string
	size      int
	zstd      bool // produced zstd-compressed (the broker sees far less)
	partition int32
	offset    int64
	value     []byte
}

// TestLedgerSurvivesPoisonPills (issue 16): a 1,000,100-byte malformed
// payment and a 3 MB zstd-compressed one, both accepted by the broker, sit
// in the middle of the ledger's input with a valid payment whose 1 MB id
// makes its balance too large to produce, and the ledger is SIGKILLed
// twice around them. Each is too large to dead-letter whole (with the dead-letter
// headers it exceeds MaxRecordBytes), which used to stop the ledger on
// every restart. Now the ledger keeps running, every good payment has
// exactly one balance, and each of the three is in payments.dlq exactly
// once, truncated within MaxRecordBytes and marked with its original size
// and hash.
func TestLedgerSurvivesPoisonPills(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker and the ledger as processes")
	}
	broker := startBrokerProc(t)
	seeds := []string{broker.addr}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	argv := []string{eddyBin, "ledger", "--brokers", broker.addr, "--state-dir", filepath.Join(dir, "state"), "--partitions", "2"}
	ledger, err := startApp("ledger", argv, dir, seeds, outputTopic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.close()
	if err := waitTopic(ctx, seeds, outputTopic, nil); err != nil {
		t.Fatal(err)
	}
	failed := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\nledger log, last lines:\n%s", fmt.Sprintf(format, args...), tail(ledger.logPath, 30))
	}
	// alive fails the test if the ledger stopped on its own.
	alive := func() {
		t.Helper()
		select {
		case <-ledger.child.Done():
			failed("%v", ledger.exited())
		default:
		}
	}

	good, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(inputTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	paid := 0
	pay := func(n int) {
		t.Helper()
		for range n / 50 {
			var recs []*kgo.Record
			for range 50 {
				acct := "acct-" + strconv.Itoa(paid%37)
				recs = append(recs, &kgo.Record{Key: []byte(acct), Value: fmt.Appendf(nil, `{"id":"p%d","account":%q,"amount":%d}`, paid, acct, paid%1000-300)})
				paid++
			}
			if err := good.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			alive()
			time.Sleep(50 * time.Millisecond) // about 1,000 payments a second
		}
	}
	pills := []*poisonPill{{name: "1 MB", size: 1_000_100}, {name: "3 MB zstd", size: 3_000_000, zstd: true}}
	poison := func(p *poisonPill) {
		t.Helper()
		// An unterminated string: not JSON, so not a payment.
		p.value = append([]byte(`{"id":"poison","account":"acct-3","note":"`), bytes.Repeat([]byte("x"), p.size)...)[:p.size]
		compression := kgo.NoCompression()
		if p.zstd {
			compression = kgo.ZstdCompression()
		}
		// franz-go caps a batch before compression; the broker checks the
		// (compressed) batch against max.message.bytes, 1,048,588 in
		// the embedded broker as in Kafka, which both pills pass.
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerBatchCompression(compression), kgo.ProducerBatchMaxBytes(4<<20))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		r := &kgo.Record{Topic: inputTopic, Key: []byte("acct-3"), Value: p.value}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce the %s poison pill: %v", p.name, err)
		}
		p.partition, p.offset = r.Partition, r.Offset
	}
	kill := func(n int) {
		t.Helper()
		alive()
		if err := ledger.kill(n); err != nil {
			t.Fatal(err)
		}
		t.Logf("SIGKILL #%d after %d payments", n, paid)
	}

	pay(1500)
	poison(pills[0])
	// A valid payment whose balance would be too large to produce: the
	// ledger's OnProduceError dead-letters it (truncated too) without
	// counting it in its account, which has no other payment.
	hugeID := strings.Repeat("i", 1_000_000)
	huge := &kgo.Record{Key: []byte("acct-huge"), Value: fmt.Appendf(nil, `{"id":%q,"account":"acct-huge","amount":5}`, hugeID)}
	big, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(inputTopic), kgo.ProducerBatchMaxBytes(4<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	if err := big.ProduceSync(ctx, huge).FirstErr(); err != nil {
		t.Fatalf("produce the payment with a huge id: %v", err)
	}
	pay(300)
	kill(1) // the first pill is likely in an open transaction
	pay(1200)
	poison(pills[1])
	pay(300)
	waitCommitted(ctx, t, seeds, eddy.DeadLetterTopic(inputTopic), 3, alive, failed)
	kill(2) // both pills are committed dead letters: they must not come again
	pay(1500)

	// Caught up: a balance per good payment, then a settle in which a
	// duplicate would show.
	deadline := time.Now().Add(2 * time.Minute)
	for ledger.out.count() < int64(paid) {
		alive()
		if time.Now().After(deadline) {
			failed("%d balances of %d within 2 minutes", ledger.out.count(), paid)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(catchUpSettle)
	if err := ledger.child.Stop(30 * time.Second); err != nil {
		failed("clean stop: %v", err)
	}

	payments, err := verify.ReadAll(ctx, seeds, inputTopic)
	if err != nil {
		t.Fatal(err)
	}
	balances, err := verify.ReadAll(ctx, seeds, outputTopic)
	if err != nil {
		t.Fatal(err)
	}
	rep := verify.Ledger(payments, balances)
	t.Logf("%v (the missing one is the payment with a huge id)", rep)
	// The verifier counts the huge-id payment as valid, so as missing.
	if rep.Duplicates != 0 || rep.Wrong != 0 || rep.Missing != 1 || rep.Payments != paid+1 || rep.Outputs != paid {
		var ex []string
		for _, e := range rep.Examples {
			ex = append(ex, e[:min(len(e), 200)])
		}
		failed("exactly-once violated: %v, want %d good payments with one balance each and the huge one missing; %v", rep, paid, ex)
	}
	dead, err := verify.ReadAll(ctx, seeds, eddy.DeadLetterTopic(inputTopic))
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != len(pills)+1 {
		failed("%d dead letters, want %d: one per poison pill and the payment with a huge id", len(dead), len(pills)+1)
	}
	for _, p := range pills {
		checkPoisonDeadLetter(t, p, dead)
	}
	checkHugeDeadLetter(t, huge, dead)
	log, err := os.ReadFile(ledger.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), "dead-lettered truncated"); n < len(pills) {
		t.Errorf("the ledger log says %d times that it dead-lettered a record truncated; want at least %d", n, len(pills))
	}
}

// checkPoisonDeadLetter checks that dead holds p's dead letter once:
// truncated within MaxRecordBytes, a prefix of the value, marked with the
// original size and hash.
func checkPoisonDeadLetter(t *testing.T, p *poisonPill, dead []*kgo.Record) {
	t.Helper()
	var found []*kgo.Record
	for _, r := range dead {
		if hdr(r, eddy.HeaderDLQPartition) == strconv.Itoa(int(p.partition)) && hdr(r, eddy.HeaderDLQOffset) == strconv.FormatInt(p.offset, 10) {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s pill (%d@%d): %d dead letters, want 1", p.name, p.partition, p.offset, len(found))
	}
	r := found[0]
	size := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		size += len(h.Key) + len(h.Value)
	}
	sum := sha256.Sum256(p.value)
	switch {
	case size > eddy.DefaultMaxRecordBytes:
		t.Errorf("%s pill: dead letter of %d bytes, more than MaxRecordBytes", p.name, size)
	case string(r.Key) != "acct-3" || len(r.Value) == 0 || !bytes.HasPrefix(p.value, r.Value):
		t.Errorf("%s pill: dead letter %q = %d bytes, want acct-3 and a prefix of the value", p.name, r.Key, len(r.Value))
	case hdr(r, eddy.HeaderDLQTruncated) != "value" || hdr(r, eddy.HeaderDLQValueSize) != strconv.Itoa(p.size) ||
		hdr(r, eddy.HeaderDLQValueSHA256) != hex.EncodeToString(sum[:]) || hdr(r, eddy.HeaderDLQStage) != "decode":
		t.Errorf("%s pill: dead letter headers %s", p.name, headerList(r))
	default:
		t.Logf("%s pill: dead letter of %d bytes (value %d of %d), %s", p.name, size, len(r.Value), p.size, headerList(r))
	}
}

// checkHugeDeadLetter checks that dead holds the dead letter of the
// payment with a huge id once, for its balance too large to produce.
func checkHugeDeadLetter(t *testing.T, huge *kgo.Record, dead []*kgo.Record) {
	t.Helper()
	var found []*kgo.Record
	for _, r := range dead {
		if hdr(r, eddy.HeaderDLQPartition) == strconv.Itoa(int(huge.Partition)) && hdr(r, eddy.HeaderDLQOffset) == strconv.FormatInt(huge.Offset, 10) {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("payment with a huge id (%d@%d): %d dead letters, want 1", huge.Partition, huge.Offset, len(found))
	}
	r := found[0]
	if hdr(r, eddy.HeaderDLQStage) != "produce" || !strings.Contains(hdr(r, eddy.HeaderDLQError), "MaxRecordBytes") ||
		hdr(r, eddy.HeaderDLQTruncated) != "value" || hdr(r, eddy.HeaderDLQValueSize) != strconv.Itoa(len(huge.Value)) ||
		!bytes.HasPrefix(huge.Value, r.Value) {
		t.Errorf("payment with a huge id: dead letter headers %s", headerList(r))
	}
}

func hdr(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func headerList(r *kgo.Record) string {
	var s []string
	for _, h := range r.Headers {
		s = append(s, h.Key+"="+string(h.Value))
	}
	return strings.Join(s, " ")
}

// waitCommitted waits until topic holds n committed records.
func waitCommitted(ctx context.Context, t *testing.T, seeds []string, topic string, n int, alive func(), failed func(string, ...any)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		alive()
		recs, err := verify.ReadAll(ctx, seeds, topic)
		if err == nil && len(recs) >= n {
			return
		}
		if time.Now().After(deadline) {
			failed("%s: %d committed records within a minute, want %d (%v)", topic, len(recs), n, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
