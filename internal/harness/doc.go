// Package harness holds nothing itself: its subpackages are what runs,
// measures and verifies eddy from the outside, not part of the library.
// The library is the root package and its public subpackages plus
// internal/runtime, internal/kafka and internal/failpoint; nothing there
// imports a package under internal/harness (their tests may).
//
//   - bench: the ledger, windowed and Nexmark benchmarks (eddy bench, eddy nexmark)
//   - chaos: the chaos harness (eddy chaos); chaos/diskfault faults the apps' state disk
//   - demo: the demo (eddy demo) and the process-level crash tests
//   - inspect: what a state directory holds (eddy inspect)
//   - local: runs a topology in-process over a replayable source, for the benchmarks
//   - verify: reads outputs back and checks them against a reference
//   - versitygw: a local S3-compatible server for the S3 tests and the restore benchmark
package harness
