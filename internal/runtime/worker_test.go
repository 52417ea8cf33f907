package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/harness/verify"
	"github.com/eddy-streams/eddy/state"
)

// ticking is a topology whose tasks count wall-clock punctuations in store
// "ticks"; with produce set, each punctuation also writes the new count
// to "out" under key "p<partition>". last records the last count each
// task wrote; fail makes the second punctuation of a task produce
// "doomed" and fail.
type ticking struct {
	produce, fail bool
	mu            sync.Mutex
	last          map[TaskID]uint64
}

func (tk *ticking) topology() Topology {
	return Topology{Subtopologies: []Subtopology{{
		Sources: []string{"in"},
		Stores:  []Store{{Name: "ticks"}},
		NewTask: func(tc TaskContext) (TaskProcessor, error) {
			store, err := tc.Store("ticks")
			if err != nil {
				return nil, err
			}
			return &tickTask{tk: tk, tc: tc, store: store}, nil
		},
	}}}
}

func (tk *ticking) lastCounts() map[TaskID]uint64 {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	return maps.Clone(tk.last)
}

type tickTask struct {
	tk    *ticking
	tc    TaskContext
	store *state.StoreBuffer
}

var ticksKey = []byte("n")

func (k *tickTask) count() (uint64, error) {
	v, ok, err := k.store.Get(ticksKey)
	if err != nil || !ok {
		return 0, err
	}
	return binary.BigEndian.Uint64(v), nil
}

func (k *tickTask) Process(*kgo.Record) error { return nil }
func (k *tickTask) Close() error              { return nil }

func (k *tickTask) Punctuate(time.Time) error {
	n, err := k.count()
	if err != nil {
		return err
	}
	n++
	k.store.Put(ticksKey, binary.BigEndian.AppendUint64(nil, n))
	key := []byte(fmt.Sprintf("p%d", k.tc.ID().Partition))
	if k.tk.fail && n == 2 {
		if err := k.tc.Produce("out", key, []byte("doomed"), 0, nil); err != nil {
			return err
		}
		return errors.New("boom")
	}
	if k.tk.produce {
		if err := k.tc.Produce("out", key, []byte(strconv.FormatUint(n, 10)), 0, nil); err != nil {
			return err
		}
	}
	k.tk.mu.Lock()
	if k.tk.last == nil {
		k.tk.last = map[TaskID]uint64{}
	}
	k.tk.last[k.tc.ID()] = n
	k.tk.mu.Unlock()
	return nil
}

// TestPunctuateCommitsStateWrites: punctuators that only write state (no
// record processed, nothing produced) still make their task dirty, so the
// writes are committed and survive a restart.
func TestPunctuateCommitsStateWrites(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t.TempDir(), io.Discard)
	tk := &ticking{}
	stop := h.runTopo(cfg, tk.topology())
	deadline := time.Now().Add(60 * time.Second)
	for last := tk.lastCounts(); len(last) < 2 || min(last[TaskID{Partition: 0}], last[TaskID{Partition: 1}]) < 3; last = tk.lastCounts() {
		if time.Now().After(deadline) {
			t.Fatalf("tasks punctuated only %v times", last)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	want := tk.lastCounts()

	var mu sync.Mutex
	got := map[TaskID]uint64{}
	opened := make(chan struct{}, 2)
	topo := tk.topology()
	next := topo.Subtopologies[0].NewTask
	topo.Subtopologies[0].NewTask = func(tc TaskContext) (TaskProcessor, error) {
		p, err := next(tc)
		if err != nil {
			return nil, err
		}
		n, err := p.(*tickTask).count()
		if err != nil {
			return nil, err
		}
		mu.Lock()
		got[tc.ID()] = n
		mu.Unlock()
		opened <- struct{}{}
		return p, nil
	}
	stop = h.runTopo(cfg, topo)
	<-opened
	<-opened
	stop()
	mu.Lock()
	defer mu.Unlock()
	if !maps.Equal(got, want) {
		t.Fatalf("after a restart the tasks hold %v ticks; they had written %v", got, want)
	}
}

// TestPunctuateProducesInTransactions: the outputs of punctuators are
// committed with the state they reflect: through a restart each task's
// ticks are 1, 2, 3, ... once each.
func TestPunctuateProducesInTransactions(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t.TempDir(), io.Discard)
	tk := &ticking{produce: true}
	stop := h.runTopo(cfg, tk.topology())
	h.waitOutputs(10)
	stop()
	stop = h.runTopo(cfg, tk.topology())
	h.waitOutputs(30)
	stop()
	outs, err := verify.ReadAll(context.Background(), h.seeds, "out")
	if err != nil {
		t.Fatal(err)
	}
	ticks := map[string][]string{}
	for _, r := range outs {
		ticks[string(r.Key)] = append(ticks[string(r.Key)], string(r.Value))
	}
	if len(ticks) != 2 {
		t.Fatalf("ticks of %d tasks, want 2: %v", len(ticks), ticks)
	}
	for key, vs := range ticks {
		for i, v := range vs {
			if v != strconv.Itoa(i+1) {
				t.Fatalf("task %s ticked %v: want 1, 2, 3, ... once each", key, vs)
			}
		}
	}
}

// TestPunctuateErrorStopsTheApp: a failing punctuator stops the app like
// a failing processor, and what it produced in the transaction is
// aborted.
func TestPunctuateErrorStopsTheApp(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t.TempDir(), io.Discard)
	tk := &ticking{produce: true, fail: true}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := Run(ctx, cfg, tk.topology())
	if err == nil || !strings.Contains(err.Error(), "punctuate: boom") {
		t.Fatalf("Run returned %v, want the punctuator's error", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run only returned at the test's timeout")
	}
	outs, err := verify.ReadAll(context.Background(), h.seeds, "out")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range outs {
		if string(r.Value) == "doomed" {
			t.Fatalf("the failed punctuation's record was committed: %s/%d@%d", r.Topic, r.Partition, r.Offset)
		}
	}
}
