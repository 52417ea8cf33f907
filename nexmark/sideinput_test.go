package nexmark

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// The side input is the suite's: (i, "i") for i in [0, 10000), written to
// side_input.csv as its generator writes it.
func TestSideInput(t *testing.T) {
	rows := SideInput()
	if len(rows) != 10_000 {
		t.Fatalf("%d rows, want 10000", len(rows))
	}
	for i, r := range rows {
		if r.Key != int64(i) || r.Value != strconv.Itoa(i) {
			t.Fatalf("row %d is %+v", i, r)
		}
	}
	k, v := rows[4321].Encode()
	if binary.BigEndian.Uint64(k) != 4321 || len(k) != 8 || string(v) != "4321" {
		t.Errorf("Encode: key %x, value %q", k, v)
	}

	dir := t.TempDir()
	if err := ExportSideInput(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "side_input.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if len(lines) != 10_000 || string(lines[0]) != "0,0" || string(lines[9999]) != "9999,9999" {
		t.Errorf("side_input.csv: %d lines, first %q, last %q", len(lines), lines[0], lines[len(lines)-1])
	}
}
