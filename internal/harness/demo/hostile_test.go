package demo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/harness/verify"
)

// TestHostileStream (issue 16): the ledger and the windowed example, as
// processes against a broker process, read payments mixed with a seeded
// stream of hostile records (every kind of hostileKinds: tombstones,
// garbage and random bytes, wrong JSON types, deep nesting, bad and odd
// timestamps, forged eddy.* headers, bad keys, invalid UTF-8, a lone
// surrogate, an overflowing pair; in long mode poison pills of 1 and 3 MB)
// while each app is SIGKILLed at random moments. Then every good record
// has exactly one correct balance and is in exactly the right window
// total, and every bad record is in payments.dlq exactly once per app,
// found by its eddy.topic/partition/offset headers, at the stage its kind
// expects; no good record is there.
//
// Short by default (about 1,500 good payments, 60 hostile records, two
// kills of each app); EDDY_HOSTILE=long runs 20,000 payments and ten kills
// of each. The seed is logged; EDDY_HOSTILE_SEED=<seed> replays its
// records and kill schedule (not its timing).
func TestHostileStream(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker and both examples as processes")
	}
	long := os.Getenv("EDDY_HOSTILE") == "long"
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("EDDY_HOSTILE_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("EDDY_HOSTILE_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (replay with EDDY_HOSTILE_SEED=%d), long %v", seed, seed, long)
	good, every, kills, rate := 1500, 25, 2, 300
	if long {
		good, every, kills, rate = 20_000, 200, 10, 1000
	}
	duration := time.Duration(float64(good) * float64(every) / float64(every-1) / float64(rate) * float64(time.Second))
	const window, grace = 10 * time.Second, 2 * time.Second

	broker := startBrokerProc(t)
	seeds := []string{broker.addr}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ledger, err := startApp(AppLedger, []string{eddyBin, "ledger", "--brokers", broker.addr, "--state-dir", filepath.Join(dir, "ledger-state"),
		"--partitions", "4"}, dir, seeds, outputTopic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.close()
	win, err := startApp(AppWindowed, []string{eddyBin, "windowed", "--brokers", broker.addr, "--state-dir", filepath.Join(dir, "windowed-state"),
		"--partitions", "4", "--window", window.String(), "--grace", grace.String(), "--late-topic", lateTopic}, dir, seeds, totalsTopic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer win.close()
	apps := []*app{ledger, win}
	failed := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		for _, a := range apps {
			msg += fmt.Sprintf("\n%s log (%s), last lines:\n%s", a.name, a.logPath, tail(a.logPath, 30))
		}
		t.Fatalf("seed %d: %s", seed, msg)
	}
	alive := func() {
		t.Helper()
		for _, a := range apps {
			select {
			case <-a.child.Done():
				failed("%v", a.exited())
			default:
			}
		}
	}
	for _, a := range apps {
		if err := waitTopic(ctx, seeds, a.out.topic, nil); err != nil {
			failed("%v", err)
		}
	}

	gen := &Generator{Seeds: seeds, Topic: inputTopic, Rate: rate, Accounts: 50, Seed: seed,
		// In order: a late or out-of-order payment is the windowed
		// crash test's business; here the hostile ones are.
		Events:  &EventTime{Start: time.Now().UnixMilli(), Step: 5 * 1000 / float64(rate)},
		Hostile: &Hostile{Every: every, Long: long}}
	genCtx, stopGen := context.WithTimeout(ctx, duration)
	defer stopGen()
	genDone := make(chan error, 1)
	go func() { genDone <- gen.Run(genCtx) }()

	// Each app's kills at seeded moments of the generation, in one
	// schedule.
	type killAt struct {
		at time.Duration
		a  *app
	}
	rng := rand.New(rand.NewPCG(seed, 0x4b111))
	var schedule []killAt
	for _, a := range apps {
		for range kills {
			schedule = append(schedule, killAt{time.Duration((0.05 + 0.9*rng.Float64()) * float64(duration)), a})
		}
	}
	slices.SortFunc(schedule, func(x, y killAt) int { return int(x.at - y.at) })
	start := time.Now()
	killed := map[string]int{}
	for _, k := range schedule {
		time.Sleep(time.Until(start.Add(k.at)))
		alive()
		killed[k.a.name]++
		if err := k.a.kill(killed[k.a.name]); err != nil {
			t.Fatal(err)
		}
		t.Logf("%.1fs: SIGKILL #%d of the %s after %d records", time.Since(start).Seconds(), killed[k.a.name], k.a.name, gen.Produced())
	}
	if err := <-genDone; err != nil {
		failed("generator: %v", err)
	}
	if err := gen.Close(ctx, (window + grace).Milliseconds()); err != nil {
		failed("%v", err)
	}
	if gen.Failed() != 0 {
		failed("%d records failed to be written", gen.Failed())
	}

	// Caught up: every output owed, then a settle in which a duplicate
	// would show.
	payments, err := verify.ReadAll(ctx, seeds, inputTopic)
	if err != nil {
		t.Fatal(err)
	}
	hostile := gen.Hostile.Records()
	ledger.want = gen.Produced() - gen.Hostile.BadCount()
	win.want = int64(verify.Windowed(GoodFor(AppWindowed, payments, hostile), window, grace).ExpectedWindows())
	if int64(len(payments)) != gen.Produced() {
		failed("%d records in %s, %d written", len(payments), inputTopic, gen.Produced())
	}
	deadline := time.Now().Add(3 * time.Minute)
	for _, a := range apps {
		for a.out.count() < a.want {
			alive()
			if time.Now().After(deadline) {
				failed("the %s wrote %d of %d outputs within 3 minutes", a.name, a.out.count(), a.want)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	time.Sleep(catchUpSettle)
	for _, a := range apps {
		if err := a.child.Stop(30 * time.Second); err != nil {
			failed("clean stop of the %s: %v", a.name, err)
		}
	}

	read := func(topic string) []*kgo.Record {
		t.Helper()
		recs, err := verify.ReadAll(ctx, seeds, topic)
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	balances, totals, late, dead := read(outputTopic), read(totalsTopic), read(lateTopic), read(eddy.DeadLetterTopic(inputTopic))

	ledgerGood := GoodFor(AppLedger, payments, hostile)
	rep := verify.Ledger(ledgerGood, balances)
	t.Logf("ledger: %v", rep)
	if !rep.OK() || rep.Payments != len(ledgerGood) || rep.Outputs != rep.Payments {
		failed("ledger not exactly once for the %d good records: %v %q", len(ledgerGood), rep, rep.Examples)
	}
	wref := verify.Windowed(GoodFor(AppWindowed, payments, hostile), window, grace)
	wrep := wref.Compare(totals)
	wrep.CheckLate(late)
	t.Logf("windowed: %v", wrep)
	if !wrep.OK() || wrep.Expected == 0 {
		failed("windowed totals not exact for the good records: %v %q", wrep, wrep.Examples)
	}

	// Timestamp 0 is a good time, and far behind stream time: such a
	// record is among the reference's late ones, which CheckLate found
	// on the late topic (unless it was the first of its partition).
	lateAt := map[[2]int64]bool{}
	for _, r := range wref.Late {
		lateAt[[2]int64{int64(r.Partition), r.Offset}] = true
	}
	epoch, epochLate := 0, 0
	for _, h := range hostile {
		if h.Kind == "timestamp 0" {
			epoch++
			if lateAt[[2]int64{int64(h.Partition), h.Offset}] {
				epochLate++
			}
		}
	}
	if epoch > 0 && epochLate == 0 {
		failed("none of the %d timestamp-0 payments is late for the windowed reference", epoch)
	}

	producers := map[int64]string{}
	Producers(producers, AppLedger, balances)
	Producers(producers, AppWindowed, totals)
	hrep := CheckHostile(inputTopic, hostile, dead, producers, []string{AppLedger, AppWindowed})
	t.Logf("%v; %d dead letters in all; kinds: %s", hrep, len(dead), hrep.KindList())
	for _, e := range hrep.Examples {
		t.Log(e)
	}
	if !hrep.OK() || hrep.Other != 0 {
		failed("dead letters wrong: %v (other dead letters are of no hostile record: a good payment dead-lettered)", hrep)
	}
	if want := 2 * (hrep.Bad); len(dead) != want {
		failed("%d dead letters, want %d: one per bad record per app", len(dead), want)
	}
	if len(hrep.Kinds) != HostileKinds(long) {
		failed("%d hostile kinds written, want all %d: %s", len(hrep.Kinds), HostileKinds(long), hrep.KindList())
	}
	for _, a := range apps {
		if killed[a.name] != kills {
			failed("the %s was killed %d times, want %d", a.name, killed[a.name], kills)
		}
	}
}

// TestCheckHostile: the dead-letter check finds each way a run can go
// wrong, and passes a right one.
func TestCheckHostile(t *testing.T) {
	hostile := []HostileRecord{
		{Kind: "garbage bytes", Partition: 0, Offset: 10, Ledger: StageDecode, Windowed: StageDecode},
		{Kind: "forged headers, bad record", Partition: 1, Offset: 4, Ledger: StageDecode, Windowed: StageDecode, Forged: true},
		{Kind: "timestamp 0", Partition: 1, Offset: 5},
	}
	const ledgerPID, windowedPID = 11, 22
	producers := map[int64]string{ledgerPID: AppLedger, windowedPID: AppWindowed}
	dl := func(pid int64, p int32, off int64, stage string, extra ...kgo.RecordHeader) *kgo.Record {
		hs := append(extra, kgo.RecordHeader{Key: eddy.HeaderDLQStage, Value: []byte(stage)},
			kgo.RecordHeader{Key: eddy.HeaderDLQTopic, Value: []byte(inputTopic)},
			kgo.RecordHeader{Key: eddy.HeaderDLQPartition, Value: []byte(strconv.Itoa(int(p)))},
			kgo.RecordHeader{Key: eddy.HeaderDLQOffset, Value: []byte(strconv.FormatInt(off, 10))})
		return &kgo.Record{ProducerID: pid, Headers: hs}
	}
	forged := kgo.RecordHeader{Key: "original.eddy.offset", Value: []byte(forgedOffset)}
	right := []*kgo.Record{
		dl(ledgerPID, 0, 10, StageDecode), dl(windowedPID, 0, 10, StageDecode),
		dl(ledgerPID, 1, 4, StageDecode, forged), dl(windowedPID, 1, 4, StageDecode, forged),
	}
	apps := []string{AppLedger, AppWindowed}
	if rep := CheckHostile(inputTopic, hostile, right, producers, apps); !rep.OK() || rep.DeadLetters != 4 || rep.Other != 0 || rep.Bad != 2 {
		t.Fatalf("a right run: %v %q", rep, rep.Examples)
	}
	for name, dead := range map[string][]*kgo.Record{
		"missing":         right[1:],
		"duplicate":       append(slices.Clone(right), dl(ledgerPID, 0, 10, StageDecode)),
		"wrong stage":     append(slices.Clone(right[1:]), dl(ledgerPID, 0, 10, StageProcess)),
		"good refused":    append(slices.Clone(right), dl(windowedPID, 1, 5, StageTime)),
		"unknown app":     append(slices.Clone(right[1:]), dl(33, 0, 10, StageDecode)),
		"forged lost":     append(slices.Clone(right[:3]), dl(windowedPID, 1, 4, StageDecode)),
		"forged offset":   append(slices.Clone(right[:3]), dl(windowedPID, 1, 4, StageDecode, forged, kgo.RecordHeader{Key: eddy.HeaderDLQOffset, Value: []byte(forgedOffset)})),
		"one app for two": append(slices.Clone(right[:3]), dl(ledgerPID, 1, 4, StageDecode, forged)),
	} {
		if rep := CheckHostile(inputTopic, hostile, dead, producers, apps); rep.OK() {
			t.Errorf("%s: passed: %v", name, rep)
		} else {
			t.Logf("%s: %q", name, rep.Examples)
		}
	}
}
