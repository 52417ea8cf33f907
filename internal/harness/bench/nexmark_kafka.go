package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/eddy-streams/eddy/internal/plan"
	"github.com/eddy-streams/eddy/state"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/kafka"
	eddyruntime "github.com/eddy-streams/eddy/internal/runtime"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/state/pebble"
)

// NexmarkKafka runs one query as a Kafka application, exactly once, on a
// broker of its own (see NexmarkBroker): the events are first written to
// their topics (unmeasured), then the app runs bounded until it has ended.
// The broker's data and the app's state are under opts.Dir/<query> (a
// temporary directory if opts.Dir is empty).
func NexmarkKafka(ctx context.Context, opts NexmarkOptions, eddyBinary string) (NexmarkResult, error) {
	dir, cleanup, err := runDir(opts.Dir, opts.Query.Name)
	if err != nil {
		return NexmarkResult{Query: opts.Query.Name, Events: opts.Events, Source: "kafka"}, err
	}
	defer cleanup()
	if opts.Progress != nil {
		fmt.Fprintf(opts.Progress, "%s: writing %d events to the broker (not measured)\n", opts.Query.Name, opts.Events)
	}
	b, err := StartNexmarkBroker(ctx, eddyBinary, filepath.Join(dir, "broker"), opts)
	if err != nil {
		return NexmarkResult{Query: opts.Query.Name, Events: opts.Events, Source: "kafka"}, err
	}
	defer b.Close()
	return b.run(ctx, opts, dir)
}

// NexmarkBroker is an `eddy broker` child process holding the generator's
// events, one partition a topic, for query runs over Kafka: one per run
// from the command (each query in a process of its own, its CPU its own),
// one for many queries in a test, which then loads the events once.
type NexmarkBroker struct {
	cmd   *exec.Cmd
	seeds []string
	cl    *kgo.Client
	// events is what the broker holds: the generator's seed and rate
	// and the number of events. A run must ask for the same.
	events NexmarkOptions
	topics nexmark.Topics
	// sideInput is set once q13's side input is on the broker.
	sideInput bool
	// ran holds the queries run so far: each has its app and output
	// topic, which a second run would resume from.
	ran map[string]bool
}

// StartNexmarkBroker starts `eddy broker` (eddyBinary) with its data in
// dir and writes events [0, events.Events) of the generator of
// events.Seed and events.EventRate to their topics; events' other fields
// are not used.
func StartNexmarkBroker(ctx context.Context, eddyBinary, dir string, events NexmarkOptions) (*NexmarkBroker, error) {
	g, err := nexmark.New(nexmark.Config{Seed: events.Seed, EventsPerSecond: events.EventRate})
	if err != nil {
		return nil, err
	}
	cmd, addr, err := startBrokerProcess(ctx, eddyBinary, dir)
	if err != nil {
		return nil, err
	}
	b := &NexmarkBroker{cmd: cmd, seeds: []string{addr}, topics: nexmark.DefaultTopics(), ran: map[string]bool{},
		events: NexmarkOptions{Seed: events.Seed, EventRate: events.EventRate, Events: events.Events}}
	b.cl, err = kgo.NewClient(kgo.SeedBrokers(b.seeds...), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		b.Close()
		return nil, err
	}
	t := b.topics
	specs := []kafka.TopicSpec{{Name: t.Persons, Partitions: 1}, {Name: t.Auctions, Partitions: 1}, {Name: t.Bids, Partitions: 1}}
	if err := kafka.CreateTopics(ctx, b.cl, specs...); err != nil {
		b.Close()
		return nil, err
	}
	if err := g.Produce(ctx, b.cl, t, events.Events); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Close stops the broker.
func (b *NexmarkBroker) Close() {
	if b.cl != nil {
		b.cl.Close()
	}
	b.cmd.Process.Kill()
	b.cmd.Wait()
}

// Run runs opts.Query on the broker, which must hold the events opts asks
// for; its state (and a query's files) are under opts.Dir/<query>.
func (b *NexmarkBroker) Run(ctx context.Context, opts NexmarkOptions) (NexmarkResult, error) {
	dir, cleanup, err := runDir(opts.Dir, opts.Query.Name)
	if err != nil {
		return NexmarkResult{Query: opts.Query.Name, Events: opts.Events, Source: "kafka"}, err
	}
	defer cleanup()
	return b.run(ctx, opts, dir)
}

// run runs one query as a Kafka application, exactly once, bounded
// (Config.StopAtEndOffsets) until it has ended: every window closed, as
// the in-process run's end of input closes them. CPU is this process's
// (the app's); the broker's is reported apart. The output topic is read
// back (read_committed) for the check once the run is measured, or, for a
// query that writes files (Query.Files), the files it committed under
// dir/output.
func (b *NexmarkBroker) run(ctx context.Context, opts NexmarkOptions, dir string) (res NexmarkResult, err error) {
	q := opts.Query
	res = NexmarkResult{Query: q.Name, Events: opts.Events, Source: "kafka"}
	if e := b.events; opts.Seed != e.Seed || opts.EventRate != e.EventRate || opts.Events != e.Events {
		return res, fmt.Errorf("bench: nexmark %s asks for %d events of seed %d at rate %v; the broker holds %d of seed %d at rate %v",
			q.Name, opts.Events, opts.Seed, opts.EventRate, e.Events, e.Seed, e.EventRate)
	}
	if b.ran[q.Name] {
		return res, fmt.Errorf("bench: nexmark %s ran on this broker already; its app would resume where it ended", q.Name)
	}
	b.ran[q.Name] = true
	g, err := nexmark.New(nexmark.Config{Seed: opts.Seed, EventsPerSecond: opts.EventRate})
	if err != nil {
		return res, err
	}
	topics, cl, seeds := b.topics, b.cl, b.seeds
	appID := "nexmark-" + q.Name
	output := appID + "-out"
	if q.Files != nil {
		// The query writes files: into the run's directory, read back
		// and checked after the run, as the generator source does.
		output = filepath.Join(dir, "output")
	} else if err := kafka.CreateTopics(ctx, cl, kafka.TopicSpec{Name: output, Partitions: 1}); err != nil {
		return res, err
	}
	topo := eddy.NewTopology()
	q.Build(topo, topics, output)
	rt, err := plan.Build(topo, eddy.Config{AppID: appID})
	if err != nil {
		return res, fmt.Errorf("bench: nexmark %s: %w", q.Name, err)
	}
	// The side input (q13's global table) is on the broker before the app
	// starts, as the suite's file is there before the job.
	if slices.ContainsFunc(rt.Globals, func(g eddyruntime.GlobalStore) bool { return g.Topic == topics.SideInput }) && !b.sideInput {
		if err := kafka.CreateTopics(ctx, cl, kafka.TopicSpec{Name: topics.SideInput, Partitions: 1}); err != nil {
			return res, err
		}
		if err := nexmark.ProduceSideInput(ctx, cl, topics.SideInput); err != nil {
			return res, err
		}
		b.sideInput = true
	}
	read := map[string]bool{}
	for _, sub := range rt.Subtopologies {
		for _, s := range sub.Sources {
			if s == topics.Persons || s == topics.Auctions || s == topics.Bids {
				read[s] = true
			}
		}
	}
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, slices.Collect(maps.Keys(read))...)
	if err != nil {
		return res, err
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	stopProfile, err := startCPUProfile(opts.CPUProfile)
	if err != nil {
		return res, err
	}
	defer stopProfile()
	bar := progressBar{w: opts.Progress, name: q.Name, total: total}
	runtime.GC()
	resetPeakRSS()
	brokerCPU0 := processCPU(b.cmd.Process.Pid)
	cpu0, start := cpuSeconds(), time.Now()
	bar.start = start
	var backend state.Backend // nil: the App's, sized from StateMemory
	if opts.CacheSize != 0 || opts.MemTableSize != 0 {
		pb := pebble.New(pebble.Options{CacheSize: opts.CacheSize, MemTableSize: opts.MemTableSize})
		defer pb.Close()
		backend = pb
	}
	go func() {
		done <- eddy.Run(runCtx, topo, eddy.Config{
			AppID: appID, Brokers: seeds, StateDir: filepath.Join(dir, "state"), Guarantee: eddy.ExactlyOnce,
			StopAtEndOffsets: true,
			CommitInterval:   opts.CommitInterval,
			StateMemory:      opts.StateMemory,
			TableCacheBytes:  opts.TableCacheBytes,
			Backend:          backend,
			Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),

			// The joins of q3 and q8 read a repartition topic beside a
			// source topic. Its records appear only when the upstream
			// task commits, so with MaxTaskIdle 0 the join would go on
			// with the source topic meanwhile and its partner's records
			// would arrive past the grace (docs/design.md §5.2). The
			// wait must outlast the upstream's first commit, which comes
			// after the group join and the producer's initialisation:
			// with 1 s, q8 at 1M events on 2 cores lost its first three
			// windows.
			MaxTaskIdle: 5 * time.Second,
		})
	}()
	// The bounded run returns once every task has ended; meanwhile the
	// group's committed offsets draw the progress.
	var runErr error
wait:
	for {
		select {
		case runErr = <-done:
			break wait
		case <-time.After(20 * time.Millisecond):
		}
		offs, err := adm.FetchOffsets(ctx, appID)
		if err != nil {
			continue
		}
		var committed int64
		offs.Each(func(o kadm.OffsetResponse) {
			if read[o.Topic] && o.Err == nil {
				committed += o.At
			}
		})
		bar.draw(committed)
	}
	res.Seconds = time.Since(start).Seconds()
	res.CPUSeconds = cpuSeconds() - cpu0
	res.BrokerCPUSeconds = processCPU(b.cmd.Process.Pid) - brokerCPU0
	stopProfile()
	bar.done()
	res.PeakRSSBytes = peakRSS()
	if runErr != nil {
		return res, fmt.Errorf("bench: nexmark %s: the app stopped: %w", q.Name, runErr)
	}
	res.EventsPerSecond = float64(opts.Events) / res.Seconds
	res.EventsPerCPUSecond = float64(opts.Events) / res.CPUSeconds
	res.StateBytes = dirBytes(filepath.Join(dir, "state"))
	check := q.NewCheck(g, opts.Events)
	add := check.Add
	if opts.Results != "" {
		results, err := newResultWriter(opts.Results, q)
		if err != nil {
			return res, err
		}
		add = func(key, value []byte, ts int64) {
			check.Add(key, value, ts)
			results.add(key, value)
		}
		defer func() {
			if cerr := results.close(); cerr != nil && err == nil {
				err = cerr
			}
		}()
	}
	if q.Files != nil {
		// A file's record has no timestamp: the check of such a
		// query does not use it, as with the generator source.
		err := q.Files(output, func(key, value []byte) {
			res.Outputs++
			add(key, value, 0)
		})
		if err != nil {
			res.VerifyError = err.Error()
			return res, nil
		}
	} else if res.Outputs, err = readOutput(ctx, seeds, output, add); err != nil {
		return res, err
	}
	if err := check.Verify(); err != nil {
		res.VerifyError = err.Error()
		return res, nil
	}
	res.Verified = true
	return res, nil
}

// readOutput feeds every committed record of the output topic to add.
func readOutput(ctx context.Context, seeds []string, topic string, add func(key, value []byte, ts int64)) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	// The app committed everything before this runs, so the topic is
	// complete up to its end offset; the last offset or so are transaction
	// markers, which a read_committed reader never sees as records.
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	// Each partition is read until its last record before its end (the
	// bench's output topic has one; an app's may have more).
	behind := map[int32]int64{} // partition → its end - 1, while not reached
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 1 {
			behind[o.Partition] = o.Offset - 1
		}
	})
	var n int64
	for idle := 0; len(behind) > 0; {
		pollCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		f := cl.PollFetches(pollCtx)
		cancel()
		if err := ctx.Err(); err != nil {
			return n, err
		}
		for _, e := range f.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				return n, fmt.Errorf("bench: read %s: %w", topic, e.Err)
			}
		}
		if f.NumRecords() == 0 {
			// Only markers left (a transaction's commit marker per
			// partition), or a slow fetch: a few quiet polls end it.
			if idle++; idle == 3 {
				break
			}
			continue
		}
		idle = 0
		f.EachRecord(func(r *kgo.Record) {
			n++
			if end, ok := behind[r.Partition]; ok && r.Offset+1 >= end {
				delete(behind, r.Partition)
			}
			add(r.Key, r.Value, r.Timestamp.UnixMilli())
		})
	}
	return n, nil
}

// startBrokerProcess runs `eddy broker` on a free loopback port with its
// data in dir and waits until it accepts connections.
func startBrokerProcess(ctx context.Context, eddyBinary, dir string) (*exec.Cmd, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.CommandContext(ctx, eddyBinary, "broker", "--addr", addr, "--data-dir", dir,
		"--sync-writes=false", "--partitions", "1", "--log-level", "error")
	cmd.Stderr = os.Stderr
	// The broker dies with this process, however it ends (an interrupted
	// run must not leave a broker behind).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("bench: start the broker: %w", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return cmd, addr, nil
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, "", fmt.Errorf("bench: the broker did not listen on %s within 30s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processCPU is the user + system CPU time of process pid so far, from
// /proc/pid/stat (fields 14 and 15, in clock ticks of 1/100 s on Linux).
func processCPU(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) is parenthesized and may hold spaces:
	// fields are counted after its closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0
	}
	return float64(utime+stime) / 100
}
