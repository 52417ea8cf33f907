package nexmark

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// FormatTime formats ms since the epoch as Flink prints a TIMESTAMP(3), in
// UTC ("2026-01-01 00:00:00.000"): how exported events and the queries'
// results write times, so that another engine reads them as timestamps.
func FormatTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000")
}

// exportFormats are the formats Export writes.
var exportFormats = []string{"jsonl", "csv"}

// ErrExportFormat is wrapped by Export's error for a format it does not
// write.
var ErrExportFormat = errors.New("nexmark: unknown export format")

// Export writes events [0, n) of g into dir, one file per kind —
// person.<format>, auction.<format>, bid.<format> — each event on a line in
// index order, with every field as the queries see it, named as the
// suite's DDL names it (person: id, name, emailAddress, creditCard, city,
// state, dateTime, extra; auction: id, itemName, description, initialBid,
// reserve, dateTime, expires, seller, category, extra; bid: auction,
// bidder, price, channel, url, dateTime, extra). Times are FormatTime's
// strings. format is "jsonl" (a JSON object a line) or "csv" (a header
// line, then RFC 4180 records). dir is created if needed; files in it are
// replaced.
func (g *Generator) Export(dir string, n int64, format string) error {
	if format != "jsonl" && format != "csv" {
		return fmt.Errorf("%w %q: want %v", ErrExportFormat, format, exportFormats)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("nexmark: export: %w", err)
	}
	var files [KindBid + 1]*os.File
	var ws [KindBid + 1]rowWriter
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	for _, k := range []Kind{KindPerson, KindAuction, KindBid} {
		f, err := os.Create(filepath.Join(dir, k.String()+"."+format))
		if err != nil {
			return fmt.Errorf("nexmark: export: %w", err)
		}
		files[k] = f
		cols := exportColumns(k)
		if format == "csv" {
			ws[k] = newCSVRows(f, cols)
		} else {
			ws[k] = newJSONRows(f, cols)
		}
	}
	var e Event
	for i := range n {
		g.Fill(&e, i)
		var err error
		switch e.Kind {
		case KindPerson:
			p := &e.Person
			err = ws[KindPerson].row(p.ID, p.Name, p.EmailAddress, p.CreditCard, p.City, p.State, FormatTime(p.DateTime), p.Extra)
		case KindAuction:
			a := &e.Auction
			err = ws[KindAuction].row(a.ID, a.ItemName, a.Description, a.InitialBid, a.Reserve, FormatTime(a.DateTime), FormatTime(a.Expires), a.Seller, a.Category, a.Extra)
		case KindBid:
			b := &e.Bid
			err = ws[KindBid].row(b.Auction, b.Bidder, b.Price, b.Channel, b.URL, FormatTime(b.DateTime), b.Extra)
		}
		if err != nil {
			return fmt.Errorf("nexmark: export: %w", err)
		}
	}
	for _, k := range []Kind{KindPerson, KindAuction, KindBid} {
		if err := ws[k].flush(); err != nil {
			return fmt.Errorf("nexmark: export: %w", err)
		}
		if err := files[k].Close(); err != nil {
			return fmt.Errorf("nexmark: export: %w", err)
		}
		files[k] = nil
	}
	return nil
}

// exportColumns are the columns of kind k's rows, as the suite's DDL names
// them.
func exportColumns(k Kind) []string {
	switch k {
	case KindPerson:
		return []string{"id", "name", "emailAddress", "creditCard", "city", "state", "dateTime", "extra"}
	case KindAuction:
		return []string{"id", "itemName", "description", "initialBid", "reserve", "dateTime", "expires", "seller", "category", "extra"}
	default:
		return []string{"auction", "bidder", "price", "channel", "url", "dateTime", "extra"}
	}
}

// rowWriter writes rows of int64 and string values under named columns.
type rowWriter interface {
	row(values ...any) error
	flush() error
}

// csvRows writes a header, then a record per row.
type csvRows struct {
	w      *csv.Writer
	record []string
}

func newCSVRows(f *os.File, cols []string) *csvRows {
	w := csv.NewWriter(bufio.NewWriterSize(f, 1<<16))
	w.Write(cols) // an error sticks in w: flush reports it
	return &csvRows{w: w, record: make([]string, len(cols))}
}

func (c *csvRows) row(values ...any) error {
	for i, v := range values {
		switch v := v.(type) {
		case int64:
			c.record[i] = strconv.FormatInt(v, 10)
		case string:
			c.record[i] = v
		}
	}
	return c.w.Write(c.record)
}

func (c *csvRows) flush() error {
	c.w.Flush()
	return c.w.Error()
}

// jsonRows writes a JSON object per line, the columns in order.
type jsonRows struct {
	w    *bufio.Writer
	cols []string
	line []byte
}

func newJSONRows(f *os.File, cols []string) *jsonRows {
	return &jsonRows{w: bufio.NewWriterSize(f, 1<<16), cols: cols}
}

func (j *jsonRows) row(values ...any) error {
	b := append(j.line[:0], '{')
	for i, v := range values {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, j.cols[i]) // ASCII names: the same in JSON
		b = append(b, ':')
		switch v := v.(type) {
		case int64:
			b = strconv.AppendInt(b, v, 10)
		case string:
			s, err := json.Marshal(v)
			if err != nil {
				return err
			}
			b = append(b, s...)
		}
	}
	b = append(b, '}', '\n')
	j.line = b
	_, err := j.w.Write(b)
	return err
}

func (j *jsonRows) flush() error { return j.w.Flush() }
