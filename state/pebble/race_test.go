//go:build race

package pebble

// raceEnabled: the race detector slows Pebble several times; the crash
// sweep checks fewer points under it.
const raceEnabled = true
