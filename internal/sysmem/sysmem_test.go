package sysmem

import (
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAvailable(t *testing.T) {
	dir := t.TempDir()
	meminfo := write(t, dir, "meminfo", "MemFree:  100 kB\nMemTotal:       24683664 kB\n")
	const total = 24683664 << 10
	for _, tc := range []struct {
		name   string
		v2, v1 string // file contents; "" = no file
		want   int64
		ok     bool
	}{
		{"no cgroup", "", "", total, true},
		{"v2 unlimited", "max\n", "", total, true},
		{"v2 limit", "2147483648\n", "", 2 << 30, true},
		{"v2 above the machine", "99999999999999\n", "", total, true},
		{"v1 limit", "", "1073741824\n", 1 << 30, true},
		{"v1 unlimited", "", "9223372036854771712\n", total, true},
		{"both", "4294967296", "1073741824", 1 << 30, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Files{CgroupV2: filepath.Join(dir, "none2"), CgroupV1: filepath.Join(dir, "none1"), MemInfo: meminfo}
			if tc.v2 != "" {
				f.CgroupV2 = write(t, t.TempDir(), "memory.max", tc.v2)
			}
			if tc.v1 != "" {
				f.CgroupV1 = write(t, t.TempDir(), "memory.limit_in_bytes", tc.v1)
			}
			got, ok := f.Available()
			if got != tc.want || ok != tc.ok {
				t.Fatalf("Available() = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	if _, ok := (Files{CgroupV2: "/nonexistent", CgroupV1: "/nonexistent", MemInfo: "/nonexistent"}).Available(); ok {
		t.Fatal("Available() found memory in no file")
	}
	if n, ok := Linux().Available(); !ok || n <= 0 {
		t.Fatalf("this machine: Available() = %d, %v", n, ok)
	}
}
