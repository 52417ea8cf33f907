package bench

import (
	"fmt"
	"os"
	"strings"

	"github.com/google/pprof/profile"
)

// CPUShares reads a CPU profile and splits its samples into where a
// Nexmark run spends its time, by the function that was running (the
// leaf of each stack, as pprof's flat column): each share is a fraction
// of all samples. The kinds are coarse on purpose — enough to say whether
// a query's time goes to generating, encoding, operators, state, Pebble,
// copying or the Go runtime — and a function is put in the first
// kind whose rule matches it (cpuKinds).
func CPUShares(path string) (map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("bench: cpu profile %s: %w", path, err)
	}
	shares := make(map[string]float64)
	var total float64
	for _, s := range p.Sample {
		if len(s.Location) == 0 || len(s.Value) < 2 {
			continue
		}
		v := float64(s.Value[1]) // cpu nanoseconds
		total += v
		fn := ""
		if lines := s.Location[0].Line; len(lines) > 0 && lines[0].Function != nil {
			fn = lines[0].Function.Name // the innermost inlined frame
		}
		shares[cpuKind(fn)] += v
	}
	if total == 0 {
		return shares, nil
	}
	for k := range shares {
		shares[k] = float64(int(shares[k]/total*1000+0.5)) / 1000
	}
	return shares, nil
}

// cpuKinds are the kinds of CPUShares, each with the prefixes (or, after
// a "*", the substrings) of the function names that belong to it. Order
// matters: the first match wins.
var cpuKinds = []struct {
	kind  string
	rules []string
}{
	{"encoding", []string{"*Serde", "*serde.", "*decoder", "*.append", "*reader)", "encoding/binary.", "strconv.", "unicode/utf8."}},
	{"generator", []string{"github.com/eddy-streams/eddy/nexmark.", "math.", "math/rand"}},
	{"query", []string{"github.com/eddy-streams/eddy/nexmark/queries."}},
	{"pebble", []string{"github.com/cockroachdb/", "github.com/golang/snappy", "github.com/klauspost/", "hash/crc32.", "github.com/DataDog/"}},
	{"state", []string{"github.com/eddy-streams/eddy/state", "github.com/eddy-streams/eddy/internal/chunked", "github.com/google/btree", "slices.", "sort.", "bytes.Compare", "cmpbody"}},
	{"engine", []string{"github.com/eddy-streams/eddy", "github.com/twmb/franz-go"}},
	{"copy", []string{"runtime.memmove", "runtime.memclr"}},
	{"maps", []string{"internal/runtime/maps.", "runtime.mapaccess", "runtime.mapassign", "runtime.mapdelete", "aeshash", "memeqbody", "hash/maphash", "runtime.memhash"}},
	{"syscalls", []string{"syscall.", "internal/runtime/syscall", "runtime.futex", "runtime.tgkill", "runtime.madvise", "runtime.usleep", "runtime.osyield", "runtime.nanotime", "runtime.procyield", "os."}},
	{"runtime", []string{"runtime.", "gcWriteBarrier", "internal/runtime/"}},
}

// cpuKind is the kind of function fn, "other" if no rule matches.
func cpuKind(fn string) string {
	for _, k := range cpuKinds {
		for _, r := range k.rules {
			if sub, ok := strings.CutPrefix(r, "*"); ok {
				if strings.Contains(fn, sub) {
					return k.kind
				}
			} else if strings.HasPrefix(fn, r) {
				return k.kind
			}
		}
	}
	return "other"
}
