package nexmark

import (
	"math/bits"
	"math/rand/v2"
)

// rng is a per-event random source. It wraps a PCG by value and implements
// the few draws the generator needs itself, because rand.New(&pcg) would
// put the source behind an interface and move it to the heap on every
// event.
type rng struct{ p rand.PCG }

// Salts separate the streams drawn for events from those drawn for a
// channel's URL, so that the two never share a PCG state.
const (
	eventSalt   = 0x6e65786d61726b31 // "nexmark1"
	channelSalt = 0x6e65786d61726b32 // "nexmark2"
	lettersSalt = 0x6e65786d61726b33 // "nexmark3"
)

// newRNG returns the source for stream (seed, salt, i). Seed and salt are
// hashed in turn rather than combined first (seed^salt would make seed 2's
// events seed 1's channel URLs), and the index goes through splitmix64 so
// that neighbouring indexes start from unrelated PCG states.
func newRNG(seed, salt uint64, i int64) rng {
	h := splitmix64(splitmix64(seed) ^ salt)
	var r rng
	r.p.Seed(h, splitmix64(uint64(i)^splitmix64(h)))
	return r
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func (r *rng) uint64() uint64 { return r.p.Uint64() }

// int64N returns a uniform value in [0, n) for n > 0 by Lemire's
// multiply-and-reject method (as math/rand/v2 does).
func (r *rng) int64N(n int64) int64 {
	un := uint64(n)
	hi, lo := bits.Mul64(r.p.Uint64(), un)
	if lo < un {
		thresh := -un % un
		for lo < thresh {
			hi, lo = bits.Mul64(r.p.Uint64(), un)
		}
	}
	return int64(hi)
}

func (r *rng) intN(n int) int { return int(r.int64N(int64(n))) }

// float64 returns a uniform value in [0, 1).
func (r *rng) float64() float64 { return float64(r.p.Uint64()>>11) * 0x1p-53 }
