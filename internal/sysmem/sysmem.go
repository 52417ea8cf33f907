// Package sysmem tells how much memory the process may use: the machine's,
// or less when a cgroup (a container's limit) says so. eddy sizes its
// default state memory budget from it, as CockroachDB sizes its cache from
// a fraction of the memory it finds.
package sysmem

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Files read by Available, in the order they are tried; tests point them
// elsewhere.
type Files struct {
	// CgroupV2 is cgroup v2's memory.max ("max" or bytes), CgroupV1
	// v1's memory.limit_in_bytes, MemInfo /proc/meminfo.
	CgroupV2, CgroupV1, MemInfo string
}

// Linux returns the files of a Linux process.
func Linux() Files {
	return Files{
		CgroupV2: "/sys/fs/cgroup/memory.max",
		CgroupV1: "/sys/fs/cgroup/memory/memory.limit_in_bytes",
		MemInfo:  "/proc/meminfo",
	}
}

// Available returns the bytes of memory the process may use: the smallest
// of the physical memory and the cgroup limits found, and false when none
// can be read (another OS).
func (f Files) Available() (int64, bool) {
	total, ok := memTotal(f.MemInfo)
	for _, name := range []string{f.CgroupV2, f.CgroupV1} {
		if limit, found := readLimit(name); found && (!ok || limit < total) {
			total, ok = limit, true
		}
	}
	return total, ok
}

// readLimit reads a cgroup limit file; "max" and cgroup v1's "no limit"
// value (a page-rounded 2^63) are no limit.
func readLimit(name string) (int64, bool) {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil || n <= 0 || n >= 1<<62 {
		return 0, false
	}
	return n, true
}

// memTotal reads MemTotal from a meminfo file.
func memTotal(name string) (int64, bool) {
	f, err := os.Open(name)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil || kb <= 0 {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}
