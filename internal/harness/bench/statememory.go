package bench

// The state-memory benchmark shows whether an app's memory stays within
// its state budget (eddy.Config.StateMemory) while its state grows far
// past it. `eddy bench ledger` runs the app in the process of the embedded
// broker, whose memory grows with every record, so its RSS says nothing
// of the app's: here the broker stays in this process and the app, the
// ledger and nothing else, runs in a child process whose RSS is sampled.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/ledger/pipeline"
	"github.com/eddy-streams/eddy/httpapi"
	"github.com/eddy-streams/eddy/internal/kafka"
)

// StateMemoryChildEnv marks the child process of the state-memory
// benchmark: set, it holds the child's configuration (JSON) and the
// process it is set in must call StateMemoryChild with it instead of
// doing its usual work. `eddy bench state-memory` does; so does this
// package's test binary.
const StateMemoryChildEnv = "EDDY_BENCH_STATE_MEMORY_CHILD"

// StateMemoryOptions configure the state-memory benchmark.
type StateMemoryOptions struct {
	// StateMemory is the child app's Config.StateMemory.
	StateMemory int64
	// Keys is the number of distinct accounts: payment i goes to account
	// i while i < Keys (each a new key, so the state grows with every
	// payment), then to a random one of them.
	Keys int
	// Records is the number of payments.
	Records int
	// Partitions of the payments topic (the app's tasks).
	Partitions int
	// Sample is the interval between samples.
	Sample time.Duration
	// Batch is the number of payments produced at a time; the producer
	// stays at most Ahead payments ahead of what the app has committed,
	// so it goes at the app's pace and the broker holds little lag.
	Batch, Ahead int
	// Child is the command line of a process that calls StateMemoryChild
	// when StateMemoryChildEnv is set: os.Executable() and the arguments
	// that reach that call.
	Child []string
	// HeapProfile, when set, receives a heap profile of the child at the
	// end of the run (after a garbage collection).
	HeapProfile string
	// Out receives a table row per sample and the child's log (nil: none).
	Out io.Writer
	// JSON receives each sample and the summary as JSON lines (nil: none).
	JSON io.Writer
}

// MemorySample is what the benchmark sees of the child at one moment.
type MemorySample struct {
	Seconds   float64 `json:"seconds"`
	Committed int64   `json:"records_committed"`
	// Keys is min(Committed, Keys): about the distinct accounts the
	// state holds (the first Keys payments each go to a new account).
	Keys int64 `json:"state_keys"`
	// DiskBytes is the space the child's state directory takes (du).
	DiskBytes int64 `json:"state_disk_bytes"`
	// From the child's /metrics: eddy_state_memory_used_bytes by part,
	// keys the write buffers evicted, the Go heap in use and the memory
	// the Go runtime holds from the OS (its sys bytes less the heap it
	// released): the rest of the RSS is memory allocated in C (Pebble's
	// block cache and memtables, with cgo) and the binary.
	BufferBytes     int64 `json:"write_buffers_bytes"`
	BlockCacheBytes int64 `json:"block_cache_bytes"`
	MemtableBytes   int64 `json:"memtables_bytes"`
	Evictions       int64 `json:"evictions"`
	GoHeapBytes     int64 `json:"go_heap_inuse_bytes"`
	GoHeldBytes     int64 `json:"go_held_bytes"`
	// From /proc/<child>/status: the resident set now and its peak.
	RSSBytes int64 `json:"rss_bytes"`
	HWMBytes int64 `json:"rss_peak_bytes"`
}

// StateMemoryResult is a run's samples and summary.
type StateMemoryResult struct {
	Budget  int64          `json:"budget_bytes"`
	Keys    int            `json:"keys"`
	Records int            `json:"records"`
	Samples []MemorySample `json:"-"`
	// KeyBytes is what one account costs in the write buffers: their use
	// over the accounts held at the last sample before they first
	// evicted (0 if there was no such sample).
	KeyBytes float64 `json:"write_buffer_bytes_per_key"`
	// MemoryRatio is the final state as held in memory (Keys × KeyBytes)
	// over the budget; DiskRatio the final state on disk over the budget.
	MemoryRatio float64 `json:"state_in_memory_over_budget"`
	DiskRatio   float64 `json:"state_on_disk_over_budget"`
	// RSS10, RSS50 and RSS100 are the child's RSS at the first samples
	// with 10%, 50% and 100% of the payments committed; PeakRSS its
	// VmHWM at the end.
	RSS10   int64   `json:"rss_at_10pct_bytes"`
	RSS50   int64   `json:"rss_at_50pct_bytes"`
	RSS100  int64   `json:"rss_at_100pct_bytes"`
	PeakRSS int64   `json:"rss_peak_bytes"`
	Seconds float64 `json:"seconds"`
	// ChildPid and Dir are the child's process id and the run's
	// directory (the child's state), both gone when StateMemory returns.
	ChildPid int    `json:"-"`
	Dir      string `json:"-"`
}

// childConfig is what the parent passes the child in StateMemoryChildEnv.
type childConfig struct {
	Brokers     []string `json:"brokers"`
	AppID       string   `json:"app_id"`
	Input       string   `json:"input"`
	Output      string   `json:"output"`
	StateDir    string   `json:"state_dir"`
	StateMemory int64    `json:"state_memory"`
}

// childAddrPrefix starts the line on which the child announces the address
// of its HTTP server.
const childAddrPrefix = "eddy-state-memory-child http="

// StateMemory runs the benchmark: an embedded broker here, the ledger in a
// child process, payments to ever-new accounts produced in batches at the
// app's pace, and a sample of the child every opts.Sample until it has
// committed every payment. The child is killed and its directory removed
// however the run ends.
func StateMemory(ctx context.Context, opts StateMemoryOptions) (res StateMemoryResult, err error) {
	if opts.Keys < 1 || opts.Records < 1 || opts.Partitions < 1 || opts.Sample <= 0 || len(opts.Child) == 0 {
		return res, errors.New("bench: state-memory: Keys, Records and Partitions must be at least 1, Sample positive, Child set")
	}
	if opts.Batch < 1 {
		opts.Batch = 10_000
	}
	if opts.Ahead < opts.Batch {
		opts.Ahead = 4 * opts.Batch
	}
	// The child's output and the table go to out from several goroutines.
	var out io.Writer = &lockedWriter{w: io.Discard}
	if opts.Out != nil {
		out = &lockedWriter{w: opts.Out}
	}
	res = StateMemoryResult{Budget: opts.StateMemory, Keys: opts.Keys, Records: opts.Records}
	dir, err := os.MkdirTemp("", "eddy-bench-state-memory-")
	if err != nil {
		return res, err
	}
	res.Dir = dir
	defer os.RemoveAll(dir)

	broker, cl, err := startBroker(opts.Partitions)
	if err != nil {
		return res, err
	}
	defer broker.Close()
	defer cl.Close()
	seeds := []string{broker.Addr()}
	const output = "balances"
	if err := kafka.CreateTopics(ctx, cl, kafka.TopicSpec{Name: inputTopic, Partitions: int32(opts.Partitions)},
		kafka.TopicSpec{Name: output, Partitions: int32(opts.Partitions)}); err != nil {
		return res, err
	}
	cfg := childConfig{Brokers: seeds, AppID: "bench-state-memory", Input: inputTopic, Output: output,
		StateDir: filepath.Join(dir, "state"), StateMemory: opts.StateMemory}
	child, err := startChild(opts.Child, cfg, out)
	if err != nil {
		return res, err
	}
	res.ChildPid = child.cmd.Process.Pid
	defer child.kill()
	addr, err := child.waitAddr(ctx)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(out, "state-memory: budget %d MiB, %d payments over %d accounts in %d partitions; broker here, the ledger in pid %d (metrics on %s)\n",
		opts.StateMemory>>20, opts.Records, opts.Keys, opts.Partitions, res.ChildPid, addr)

	adm := kadm.NewClient(cl)
	committed := func() (int64, error) { return committedInput(ctx, adm, cfg.AppID) }

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	produced := make(chan error, 1)
	go func() { produced <- produceNewAccounts(runCtx, cl, opts, committed) }()

	start := time.Now()
	tick := time.NewTicker(opts.Sample)
	defer tick.Stop()
	scraper := &http.Client{Timeout: 10 * time.Second}
	enc := json.NewEncoder(io.Discard)
	if opts.JSON != nil {
		enc = json.NewEncoder(opts.JSON)
	}
	fmt.Fprintf(out, "%7s %10s %10s %9s %9s %9s %9s %10s %9s %9s %9s %9s\n",
		"seconds", "committed", "keys", "disk MiB", "buf MiB", "cache MiB", "memt MiB", "evictions", "heap MiB", "Go MiB", "RSS MiB", "peak MiB")
	for {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-child.done:
			return res, fmt.Errorf("bench: state-memory: the child stopped: %w", child.err)
		case err := <-produced:
			if err != nil {
				return res, fmt.Errorf("bench: state-memory: produce: %w", err)
			}
			produced = nil // done producing; keep sampling until committed
			continue
		case <-tick.C:
		}
		s := MemorySample{Seconds: time.Since(start).Seconds()}
		if s.Committed, err = committed(); err != nil {
			continue
		}
		s.Keys = min(s.Committed, int64(opts.Keys))
		s.RSSBytes, s.HWMBytes = procMemory(res.ChildPid)
		s.DiskBytes = diskUsage(cfg.StateDir)
		if err := scrapeChild(ctx, scraper, "http://"+addr+"/metrics", &s); err != nil {
			fmt.Fprintf(out, "state-memory: metrics: %v\n", err)
		}
		res.Samples = append(res.Samples, s)
		mib := func(v int64) float64 { return float64(v) / (1 << 20) }
		fmt.Fprintf(out, "%7.0f %10d %10d %9.1f %9.1f %9.1f %9.1f %10d %9.1f %9.1f %9.1f %9.1f\n",
			s.Seconds, s.Committed, s.Keys, mib(s.DiskBytes), mib(s.BufferBytes), mib(s.BlockCacheBytes), mib(s.MemtableBytes),
			s.Evictions, mib(s.GoHeapBytes), mib(s.GoHeldBytes), mib(s.RSSBytes), mib(s.HWMBytes))
		if err := enc.Encode(s); err != nil {
			return res, err
		}
		if s.Committed >= int64(opts.Records) {
			break
		}
	}
	res.Seconds = time.Since(start).Seconds()
	if opts.HeapProfile != "" {
		if err := fetchHeapProfile(ctx, scraper, "http://"+addr+childHeapPath, opts.HeapProfile); err != nil {
			return res, err
		}
	}
	res.summarize()
	return res, enc.Encode(res)
}

// summarize fills the summary figures from the samples.
func (r *StateMemoryResult) summarize() {
	if len(r.Samples) == 0 {
		return
	}
	for _, s := range r.Samples {
		if s.Evictions > 0 {
			break
		}
		if s.Keys > 0 && s.BufferBytes > 0 {
			r.KeyBytes = float64(s.BufferBytes) / float64(s.Keys)
		}
	}
	last := r.Samples[len(r.Samples)-1]
	if r.Budget > 0 {
		r.MemoryRatio = float64(last.Keys) * r.KeyBytes / float64(r.Budget)
		r.DiskRatio = float64(last.DiskBytes) / float64(r.Budget)
	}
	at := func(frac float64) int64 {
		for _, s := range r.Samples {
			if float64(s.Committed) >= frac*float64(r.Records) {
				return s.RSSBytes
			}
		}
		return last.RSSBytes
	}
	r.RSS10, r.RSS50, r.RSS100 = at(0.1), at(0.5), at(1)
	for _, s := range r.Samples {
		r.PeakRSS = max(r.PeakRSS, s.HWMBytes)
	}
}

// Summary is the result's summary line.
func (r StateMemoryResult) Summary() string {
	mib := func(v int64) string { return fmt.Sprintf("%.0f MiB", float64(v)/(1<<20)) }
	return fmt.Sprintf("budget %s; %d accounts × %.0f B in the write buffers = %.1f× the budget in memory, %.1f× on disk; child RSS at 10%% %s, 50%% %s, 100%% %s of the payments, peak %s; %.0f s",
		mib(r.Budget), min(r.Keys, r.Records), r.KeyBytes, r.MemoryRatio, r.DiskRatio, mib(r.RSS10), mib(r.RSS50), mib(r.RSS100), mib(r.PeakRSS), r.Seconds)
}

// produceNewAccounts writes opts.Records payments in batches of opts.Batch,
// each batch once the app has committed all but opts.Ahead of those before
// it; payment i goes to account i while i < opts.Keys.
func produceNewAccounts(ctx context.Context, cl *kgo.Client, opts StateMemoryOptions, committed func() (int64, error)) error {
	rng := rand.New(rand.NewPCG(3, 4))
	errc := make(chan error, 1)
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			select {
			case errc <- err:
			default:
			}
		}
	}
	for i := 0; i < opts.Records; {
		for {
			c, err := committed()
			if err == nil && int64(i)-c <= int64(opts.Ahead-opts.Batch) {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		for end := min(i+opts.Batch, opts.Records); i < end; i++ {
			n := i
			if n >= opts.Keys {
				n = rng.IntN(opts.Keys)
			}
			account := fmt.Sprintf("acct-%09d", n)
			v, _ := json.Marshal(pipeline.Payment{ID: "p" + strconv.Itoa(i), Account: account, Amount: rng.Int64N(1501) - 500})
			cl.Produce(ctx, &kgo.Record{Key: []byte(account), Value: v}, promise)
		}
		if err := cl.Flush(ctx); err != nil {
			return err
		}
		select {
		case err := <-errc:
			return err
		default:
		}
	}
	return nil
}

// stateChild is the running child process.
type stateChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  chan string
	done  chan struct{} // closed when the process has exited
	err   error         // its exit status, once done is closed
}

func startChild(argv []string, cfg childConfig, log io.Writer) (*stateChild, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), StateMemoryChildEnv+"="+string(b))
	cmd.Stderr = log
	// The child dies with this process however it ends; it also stops
	// when its stdin closes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: state-memory: start the child: %w", err)
	}
	c := &stateChild{cmd: cmd, stdin: stdin, addr: make(chan string, 1), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), childAddrPrefix); ok {
				c.addr <- a
			} else {
				fmt.Fprintln(log, sc.Text())
			}
		}
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// waitAddr waits for the child's HTTP address.
func (c *stateChild) waitAddr(ctx context.Context) (string, error) {
	select {
	case a := <-c.addr:
		return a, nil
	case <-c.done:
		return "", fmt.Errorf("bench: state-memory: the child stopped before serving HTTP: %v", c.err)
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(time.Minute):
		return "", errors.New("bench: state-memory: the child did not serve HTTP within a minute")
	}
}

// kill kills the child and waits until it is gone.
func (c *stateChild) kill() {
	c.stdin.Close()
	_ = c.cmd.Process.Kill()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
	}
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// procMemory reads VmRSS and VmHWM of process pid, in bytes.
func procMemory(pid int) (rss, hwm int64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		f := strings.Fields(v) // "123456 kB"
		if len(f) == 0 {
			continue
		}
		kb, _ := strconv.ParseInt(f[0], 10, 64)
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	return rss, hwm
}

// diskUsage is the space the files under dir take, as du counts it
// (allocated blocks); files that vanish during the walk are skipped.
func diskUsage(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			} else {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// scrapeChild reads the child's metrics into s.
func scrapeChild(ctx context.Context, cl *http.Client, url string, s *MemorySample) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return err
	}
	get := func(name string, labels ...string) int64 {
		v := sumMetric(families, name, labels...)
		if math.IsNaN(v) {
			return 0
		}
		return int64(v)
	}
	s.BufferBytes = get("eddy_state_memory_used_bytes", "part", "write_buffers")
	s.BlockCacheBytes = get("eddy_state_memory_used_bytes", "part", "block_cache")
	s.MemtableBytes = get("eddy_state_memory_used_bytes", "part", "memtables")
	s.Evictions = get("eddy_state_cache_evictions_total")
	s.GoHeapBytes = get("go_memstats_heap_inuse_bytes")
	s.GoHeldBytes = get("go_memstats_sys_bytes") - get("go_memstats_heap_released_bytes")
	return nil
}

// childHeapPath serves a heap profile of the child, after a collection.
const childHeapPath = "/debug/heap"

func fetchHeapProfile(ctx context.Context, cl *http.Client, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return fmt.Errorf("bench: state-memory: heap profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("bench: state-memory: heap profile: %s", resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// StateMemoryChild is the child process of the benchmark: it runs the
// ledger exactly once with config (StateMemoryChildEnv's value) and serves
// its /metrics and a heap profile on a loopback port, which it announces
// on stdout, until ctx ends or its stdin closes.
func StateMemoryChild(ctx context.Context, config string) error {
	var cfg childConfig
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		return fmt.Errorf("eddy: %s: %w", StateMemoryChildEnv, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	app, err := eddy.New(pipeline.Topology(cfg.Input, cfg.Output), eddy.Config{
		AppID: cfg.AppID, Brokers: cfg.Brokers, StateDir: cfg.StateDir, Guarantee: eddy.ExactlyOnce,
		StateMemory: cfg.StateMemory,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/", app.Handler())
	mux.HandleFunc("GET "+childHeapPath, func(w http.ResponseWriter, _ *http.Request) {
		runtime.GC()
		w.Header().Set("Content-Type", "application/octet-stream")
		_ = pprof.Lookup("heap").WriteTo(w, 0)
	})
	served := make(chan error, 1)
	go func() { served <- httpapi.Serve(ctx, ln, mux) }()
	fmt.Printf("%s%s\n", childAddrPrefix, ln.Addr())
	err = app.Run(ctx)
	cancel()
	if serr := <-served; err == nil {
		err = serr
	}
	return err
}
