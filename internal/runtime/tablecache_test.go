package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/harness/verify"
	"github.com/eddy-streams/eddy/state"
)

// holding counts records per key in store "counts", as counting does, but
// holds each key's latest count back, as a table cache does (TaskFlusher):
// Flush writes one "out" record per key held, its count, in the order the
// keys were first held. With failFlush set, a Flush that holds something
// produces its first record and fails. discards counts Discard calls.
type holding struct {
	failFlush atomic.Bool
	discards  atomic.Int64
}

func (hd *holding) topology() Topology {
	return Topology{Subtopologies: []Subtopology{{
		Sources: []string{"in"},
		Stores:  []Store{{Name: "counts"}},
		NewTask: func(tc TaskContext) (TaskProcessor, error) {
			store, err := tc.Store("counts")
			if err != nil {
				return nil, err
			}
			return &holdTask{hd: hd, tc: tc, store: store, held: map[string]uint64{}}, nil
		},
	}}}
}

type holdTask struct {
	hd    *holding
	tc    TaskContext
	store *state.StoreBuffer
	held  map[string]uint64
	order []string
}

func (k *holdTask) Process(r *kgo.Record) error {
	v, ok, err := k.store.Get(r.Key)
	if err != nil {
		return err
	}
	var n uint64
	if ok {
		n = binary.BigEndian.Uint64(v)
	}
	n++
	k.store.Put(r.Key, binary.BigEndian.AppendUint64(nil, n))
	if _, ok := k.held[string(r.Key)]; !ok {
		k.order = append(k.order, string(r.Key))
	}
	k.held[string(r.Key)] = n
	return nil
}

func (k *holdTask) Flush() error {
	for i, key := range k.order {
		if err := k.tc.Produce("out", []byte(key), binary.BigEndian.AppendUint64(nil, k.held[key]), 0, nil); err != nil {
			return err
		}
		if i == 0 && k.hd.failFlush.Load() {
			return errors.New("flush boom")
		}
	}
	k.Discard()
	return nil
}

func (k *holdTask) Discard() {
	k.hd.discards.Add(1)
	clear(k.held)
	k.order = k.order[:0]
}

func (k *holdTask) Punctuate(time.Time) error { return nil }
func (k *holdTask) Close() error              { return nil }

// TestFlushErrorAbortsAndRestartIsExact: the worker flushes held updates
// at the start of its commit, into the transaction; a flush that fails
// after producing aborts the transaction (its record never shows) and
// stops the app, and the task's held updates are discarded. Restarted on
// the same state, the app forwards each key's counts without a gap in
// the final value or a count twice: the aborted transaction's records
// were processed again from the committed state.
func TestFlushErrorAbortsAndRestartIsExact(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t.TempDir(), io.Discard)
	const n = 200 // keys k0..k4, 40 records each
	h.produce(0, n)
	hd := &holding{}
	hd.failFlush.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := Run(ctx, cfg, hd.topology())
	if err == nil || !strings.Contains(err.Error(), "flush: flush boom") {
		t.Fatalf("Run returned %v, want the flush's error", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run only returned at the test's timeout")
	}
	if outs, err := verify.ReadAll(context.Background(), h.seeds, "out"); err != nil || len(outs) != 0 {
		t.Fatalf("after the failed flush out holds %d committed records (%v), want none", len(outs), err)
	}
	if hd.discards.Load() == 0 {
		t.Error("the aborted transaction's held updates were never discarded")
	}

	hd.failFlush.Store(false)
	stop := h.runTopo(cfg, hd.topology())
	defer stop()
	deadline := time.Now().Add(60 * time.Second)
	for {
		outs, err := verify.ReadAll(context.Background(), h.seeds, "out")
		if err != nil {
			t.Fatal(err)
		}
		last := map[string]uint64{}
		bad := ""
		for _, r := range outs {
			c := binary.BigEndian.Uint64(r.Value)
			if c <= last[string(r.Key)] {
				bad = string(r.Key)
			}
			last[string(r.Key)] = c
		}
		if bad != "" {
			t.Fatalf("key %s's counts do not increase (a count forwarded twice): %v", bad, outs)
		}
		done := len(last) == 5
		for _, c := range last {
			done = done && c == n/5
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the last counts are %v after 60s, want %d for each of the 5 keys", last, n/5)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
