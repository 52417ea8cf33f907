package queries

import (
	"bufio"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/filesink"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q10 logs every bid to the file system, partitioned by day and minute:
//
//	INSERT INTO nexmark_q10   -- PARTITIONED BY (dt, hm), filesystem, csv
//	SELECT auction, bidder, price, dateTime, extra,
//	       DATE_FORMAT(dateTime, 'yyyy-MM-dd'), DATE_FORMAT(dateTime, 'HH:mm')
//	FROM bid
//
// with Flink's partition-time commit trigger (a success file once the
// watermark passed the partition's time plus a minute) and files rolled
// every minute. Plan: the bids, straight into filesink.To (exactly once:
// part files renamed into sight at each commit) under out, which is a
// directory here, not a topic (Query.Files): dt=yyyy-MM-dd/hm=HH:mm (UTC)
// per bid's dateTime, each line auction,bidder,price,dateTime,extra (the
// partition columns are in the path, as Flink writes them; dateTime as
// Timestamp prints it), a _SUCCESS file once stream time reached the
// partition's minute's end (partition time plus a minute; the end of
// input completes every partition). Files reads the committed result as
// records: key the partition ("dt=2026-01-01/hm=12:00"), value a line
// without its line break. Check: every bid's line in its partition, once
// (a digest per partition), and every partition complete.
func q10() Query {
	return Query{
		Name:  "q10",
		Title: "log to file system",
		Build: func(t *eddy.Topology, in nexmark.Topics, out string) {
			bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde())
			filesink.To(bids, "q10", filesink.Config[int64, nexmark.Bid]{
				Dir: out,
				Partition: func(dst []byte, r eddy.Record[int64, nexmark.Bid]) []byte {
					return appendMinutePartition(dst, r.Value.DateTime)
				},
				Encode: func(dst []byte, r eddy.Record[int64, nexmark.Bid]) ([]byte, error) {
					b := &r.Value
					dst = strconv.AppendInt(dst, b.Auction, 10)
					dst = append(dst, ',')
					dst = strconv.AppendInt(dst, b.Bidder, 10)
					dst = append(dst, ',')
					dst = strconv.AppendInt(dst, b.Price, 10)
					dst = append(dst, ',')
					dst = appendTimestamp(dst, b.DateTime)
					dst = append(dst, ',')
					dst = appendCSVField(dst, b.Extra)
					return append(dst, '\n'), nil
				},
				Suffix:        ".csv",
				RollInterval:  time.Minute,
				PartitionTime: minutePartitionTime,
				CommitDelay:   time.Minute,
				Tasks:         max(1, in.Partitions),
			})
		},
		NewCheck: func(g *nexmark.Generator, n int64) Check { return newQ10Check(g, n) },
		Result:   q10Result(),
		Files:    readQ10Files,
	}
}

// appendMinutePartition appends "dt=yyyy-MM-dd/hm=HH:mm" of ms (UTC).
func appendMinutePartition(dst []byte, ms int64) []byte {
	t := time.UnixMilli(ms).UTC()
	y, mo, d := t.Date()
	h, mi, _ := t.Clock()
	dst = append(dst, "dt="...)
	dst = appendDate(dst, y, int(mo), d)
	dst = append(dst, "/hm="...)
	return append(appendTwo(dst, h), ':', byte('0'+mi/10), byte('0'+mi%10))
}

// appendTimestamp appends ms as Timestamp formats it, without its
// allocations: "2026-01-01 12:00:00.000".
func appendTimestamp(dst []byte, ms int64) []byte {
	t := time.UnixMilli(ms).UTC()
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	dst = append(appendDate(dst, y, int(mo), d), ' ')
	dst = append(appendTwo(dst, h), ':')
	dst = append(appendTwo(dst, mi), ':')
	dst = append(appendTwo(dst, s), '.')
	milli := int(ms % 1000)
	if milli < 0 {
		milli += 1000
	}
	return append(dst, byte('0'+milli/100), byte('0'+milli/10%10), byte('0'+milli%10))
}

func appendDate(dst []byte, y, mo, d int) []byte {
	if y < 1000 || y > 9999 {
		return append(dst, fmt.Sprintf("%04d-%02d-%02d", y, mo, d)...)
	}
	dst = strconv.AppendInt(dst, int64(y), 10)
	dst = append(appendTwo(append(dst, '-'), mo), '-')
	return appendTwo(dst, d)
}

func appendTwo(dst []byte, v int) []byte { return append(dst, byte('0'+v/10), byte('0'+v%10)) }

// appendCSVField appends s as a CSV field: quoted, its quotes doubled,
// when it holds a comma, a quote or a line break.
func appendCSVField(dst []byte, s string) []byte {
	if !strings.ContainsAny(s, ",\"\r\n") {
		return append(dst, s...)
	}
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			dst = append(dst, '"')
		}
		dst = append(dst, s[i])
	}
	return append(dst, '"')
}

// minutePartitionTime is the start of a "dt=yyyy-MM-dd/hm=HH:mm"
// partition's minute; ok false for another directory ("dt=…" alone).
func minutePartitionTime(p string) (int64, bool) {
	dt, hm, ok := strings.Cut(p, "/hm=")
	day, ok2 := strings.CutPrefix(dt, "dt=")
	if !ok || !ok2 {
		return 0, false
	}
	t, err := time.Parse("2006-01-02 15:04", day+" "+hm)
	if err != nil {
		return 0, false
	}
	return t.UnixMilli(), true
}

// readQ10Files reads q10's committed result under dir, a record per line
// (key the partition, value the line), and requires it complete: every
// partition marked, no in-progress part file left.
func readQ10Files(dir string, record func(key, value []byte)) error {
	var parts []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir() && rel != "." && strings.HasPrefix(d.Name(), "."):
			return filepath.SkipDir // the sink's own
		case d.IsDir():
			if _, ok := minutePartitionTime(rel); ok {
				parts = append(parts, rel)
			}
		case strings.HasSuffix(d.Name(), ".inprogress"):
			return fmt.Errorf("q10: %s: an in-progress part file is left", rel)
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(parts)
	for _, p := range parts {
		if _, err := os.Stat(filepath.Join(dir, p, filesink.DefaultSuccessFile)); err != nil {
			return fmt.Errorf("q10: partition %s is not marked complete: %w", p, err)
		}
		files, err := filepath.Glob(filepath.Join(dir, p, "part-*.csv"))
		if err != nil {
			return err
		}
		for _, name := range files {
			if err := readLines(name, func(line []byte) { record([]byte(p), line) }); err != nil {
				return err
			}
		}
	}
	return nil
}

func readLines(name string, line func([]byte)) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line(sc.Bytes())
	}
	return sc.Err()
}

// q10Check digests the lines per partition, and the reference's.
type q10Check struct {
	g         *nexmark.Generator
	n         int64
	got, want *digest
	badKeys   int
}

func newQ10Check(g *nexmark.Generator, n int64) *q10Check {
	seed := maphash.MakeSeed()
	return &q10Check{g: g, n: n, got: newDigest(seed), want: newDigest(seed)}
}

func (c *q10Check) Add(key, value []byte, _ int64) {
	minute, ok := minutePartitionTime(string(key))
	if !ok {
		c.badKeys++
		return
	}
	c.got.add(minute, key, value)
}

// Verify writes each bid as the SQL says, with the standard library's
// formatting, and compares the digests.
func (c *q10Check) Verify() error {
	if c.badKeys > 0 {
		return fmt.Errorf("%d lines in directories that are not dt=yyyy-MM-dd/hm=HH:mm partitions", c.badKeys)
	}
	clear(c.want.groups)
	for i := range c.n {
		if nexmark.KindOf(i) != nexmark.KindBid {
			continue
		}
		e := c.g.Event(i)
		b := &e.Bid
		t := time.UnixMilli(b.DateTime).UTC()
		partition := "dt=" + t.Format("2006-01-02") + "/hm=" + t.Format("15:04")
		extra := b.Extra
		if strings.ContainsAny(extra, ",\"\r\n") {
			extra = `"` + strings.ReplaceAll(extra, `"`, `""`) + `"`
		}
		line := fmt.Sprintf("%d,%d,%d,%s,%s", b.Auction, b.Bidder, b.Price, t.Format("2006-01-02 15:04:05.000"), extra)
		minute := t.Truncate(time.Minute).UnixMilli()
		c.want.add(minute, []byte(partition), []byte(line))
	}
	return compare(c.got, c.want, "minute")
}

// q10Result reads a line of q10's files (key its partition) as the SQL's
// row.
func q10Result() Result {
	return Result{
		Columns: []string{"auction", "bidder", "price", "dateTime", "extra", "dt", "hm"},
		Rows: func(key, value []byte, row func(...any)) error {
			dt, hm, ok := strings.Cut(string(key), "/hm=")
			dt, ok2 := strings.CutPrefix(dt, "dt=")
			if !ok || !ok2 {
				return fmt.Errorf("%w: partition %q, want dt=yyyy-MM-dd/hm=HH:mm", errCorrupt, key)
			}
			fields, err := splitCSV(string(value))
			if err != nil || len(fields) != 5 {
				return fmt.Errorf("%w: line %q: want 5 CSV fields (%v)", errCorrupt, value, err)
			}
			var ints [3]int64
			for i := range ints {
				if ints[i], err = strconv.ParseInt(fields[i], 10, 64); err != nil {
					return fmt.Errorf("%w: line %q: %v", errCorrupt, value, err)
				}
			}
			row(ints[0], ints[1], ints[2], fields[3], fields[4], dt, hm)
			return nil
		},
	}
}

// splitCSV splits one CSV line into its fields, unquoting quoted ones.
func splitCSV(line string) ([]string, error) {
	var fields []string
	for {
		if !strings.HasPrefix(line, `"`) {
			f, rest, more := strings.Cut(line, ",")
			fields = append(fields, f)
			if !more {
				return fields, nil
			}
			line = rest
			continue
		}
		var b strings.Builder
		i := 1
		for {
			j := strings.IndexByte(line[i:], '"')
			if j < 0 {
				return nil, errors.New("an unterminated quote")
			}
			b.WriteString(line[i : i+j])
			i += j + 1
			if i < len(line) && line[i] == '"' {
				b.WriteByte('"')
				i++
				continue
			}
			break
		}
		fields = append(fields, b.String())
		line = line[i:]
		if line == "" {
			return fields, nil
		}
		if line[0] != ',' {
			return nil, errors.New("a quoted field followed by more than a comma")
		}
		line = line[1:]
	}
}
