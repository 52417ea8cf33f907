package nexmark

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// SideInputRows is the number of rows of the suite's side input: its
// side_input_gen.sh writes 10,000.
const SideInputRows = 10_000

// SideInputRow is a row of the side input q13 joins the bids with: the
// suite's table side_input (key BIGINT, value VARCHAR).
type SideInputRow struct {
	Key   int64
	Value string
}

// SideInput returns the suite's side input, as its SideInputGenerator
// writes it: for each key in [0, SideInputRows), the key and its decimal
// string ("42", "42"), so that a lookup of id % SideInputRows models an
// enrichment by id. It does not depend on the generator's Config.
func SideInput() []SideInputRow {
	rows := make([]SideInputRow, SideInputRows)
	for i := range rows {
		rows[i] = SideInputRow{Key: int64(i), Value: strconv.Itoa(i)}
	}
	return rows
}

// Encode returns the row as it is written to its topic (Topics.SideInput):
// the key as 8 big-endian bytes (serde.Int64), the value's bytes
// (serde.String).
func (r SideInputRow) Encode() (key, value []byte) {
	return binary.BigEndian.AppendUint64(nil, uint64(r.Key)), []byte(r.Value)
}

// ProduceSideInput writes the side input to topic through cl, one record
// per row (Encode), and returns once all are acknowledged.
func ProduceSideInput(ctx context.Context, cl *kgo.Client, topic string) error {
	rows := SideInput()
	recs := make([]*kgo.Record, len(rows))
	for i, r := range rows {
		k, v := r.Encode()
		recs[i] = &kgo.Record{Topic: topic, Key: k, Value: v}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("nexmark: produce the side input to %s: %w", topic, err)
	}
	return nil
}

// ExportSideInput writes the side input into dir as side_input.csv, the
// file the suite's q13 reads: a "key,value" line per row, with no header,
// as its SideInputGenerator writes it. dir is created if needed.
func ExportSideInput(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("nexmark: export the side input: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "side_input.csv"))
	if err != nil {
		return fmt.Errorf("nexmark: export the side input: %w", err)
	}
	w := bufio.NewWriter(f)
	var line []byte
	for _, r := range SideInput() {
		line = strconv.AppendInt(line[:0], r.Key, 10)
		line = append(append(append(line, ','), r.Value...), '\n')
		w.Write(line) // an error sticks in w: Flush reports it
	}
	err = w.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("nexmark: export the side input: %w", err)
	}
	return nil
}
