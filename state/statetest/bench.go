package statetest

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/eddy-streams/eddy/state"
)

// Bench runs the same workloads against a backend, so backends compare on
// equal terms (BENCHMARKS.md): what a task does at each commit (one synced
// Apply of a transaction's writes and offsets), point reads of a store
// larger than the memtable, and short range scans as window stores do.
func Bench(b *testing.B, newBackend func(b *testing.B) state.Backend) {
	b.Run("Apply100", func(b *testing.B) { benchApply(b, newBackend(b), 100) })
	b.Run("Apply1000", func(b *testing.B) { benchApply(b, newBackend(b), 1000) })
	b.Run("Get", func(b *testing.B) { benchGet(b, newBackend(b)) })
	b.Run("Scan100", func(b *testing.B) { benchScan(b, newBackend(b)) })
}

const (
	benchKeys  = 200_000
	benchValue = 100
)

func benchKey(dst []byte, i int) []byte { return fmt.Appendf(dst, "account-%08d", i) }

func benchOpen(b *testing.B, backend state.Backend) state.DB {
	db, err := backend.Open(filepath.Join(b.TempDir(), "task"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}

// benchApply applies batches of n writes to random keys, each with offsets,
// synced: the cost a task pays per committed transaction.
func benchApply(b *testing.B, backend state.Backend, n int) {
	db := benchOpen(b, backend)
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, benchValue)
	writes := make([]state.Write, n)
	offsets := state.NewOffsets()
	b.SetBytes(int64(n * (len("account-00000000") + benchValue)))
	for i := 0; b.Loop(); i++ {
		for j := range writes {
			writes[j] = state.Write{Store: "balances", Key: benchKey(writes[j].Key[:0], rng.IntN(benchKeys)), Value: value}
		}
		offsets.Input[state.TopicPartition{Topic: "payments", Partition: 0}] = int64(i * n)
		offsets.Changelog["balances"] = int64(i * n)
		if err := db.Apply(&state.Batch{Writes: writes, Offsets: offsets}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "writes/s")
}

// fillBench writes benchKeys keys in batches of 10,000 and reopens the
// database, so reads come from table files, not only the memtable.
func fillBench(b *testing.B, backend state.Backend) state.DB {
	dir := filepath.Join(b.TempDir(), "task")
	db, err := backend.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	value := make([]byte, benchValue)
	for start := 0; start < benchKeys; start += 10_000 {
		writes := make([]state.Write, 0, 10_000)
		for i := start; i < start+10_000; i++ {
			writes = append(writes, state.Write{Store: "balances", Key: benchKey(nil, i), Value: value})
		}
		if err := db.Apply(&state.Batch{Writes: writes}); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	if db, err = backend.Open(dir); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}

func benchGet(b *testing.B, backend state.Backend) {
	db := fillBench(b, backend)
	rng := rand.New(rand.NewPCG(1, 2))
	var key []byte
	for b.Loop() {
		key = benchKey(key[:0], rng.IntN(benchKeys))
		if _, ok, err := db.Get("balances", key); err != nil || !ok {
			b.Fatalf("Get(%s) = %v, %v", key, ok, err)
		}
	}
}

func benchScan(b *testing.B, backend state.Backend) {
	db := fillBench(b, backend)
	rng := rand.New(rand.NewPCG(1, 2))
	var lo, hi []byte
	for b.Loop() {
		i := rng.IntN(benchKeys - 100)
		lo, hi = benchKey(lo[:0], i), benchKey(hi[:0], i+100)
		n := 0
		if err := db.Scan("balances", lo, hi, func(k, v []byte) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		if n != 100 {
			b.Fatalf("scan of [%s, %s) saw %d keys; want 100", lo, hi, n)
		}
	}
}
