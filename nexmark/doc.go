// Package nexmark is eddy's implementation of the Nexmark benchmark: an
// online auction with people, auctions and bids, the standard generator and
// (later) the standard queries written with eddy's public DSL.
//
// The generator follows the model of the nexmark/nexmark Flink generator and
// Beam's NexmarkGenerator (proportions, id ranges, hot sellers, auctions and
// bidders, field distributions and sizes) so results are comparable with
// published figures, but it is a pure function of (Config, event index):
// Generator.Event(i) keeps no state between calls. That is what lets it serve
// as a replayable, partition-like source in eddy's commit cycle (replaying
// from a committed index yields the same events) and lets producers run in
// parallel over disjoint index ranges.
//
// It does not reproduce the reference implementations' exact values: they
// draw every event from one sequential java.util.Random, which cannot be
// replayed by index. Distributions, ratios and sizes match; individual
// strings and prices do not.
package nexmark
