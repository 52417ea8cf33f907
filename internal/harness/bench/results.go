package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/eddy-streams/eddy/nexmark/queries"
)

// resultWriter writes a query's result rows to <dir>/<query>.jsonl, a
// JSON object per row with the SQL's column names, for `eddy bench
// nexmark --results DIR`. An append-only result is written as its records
// arrive; an updating one (Result.Upsert) keeps the last record per row
// identity and is written, in identity order, when the run ends.
type resultWriter struct {
	res  queries.Result
	f    *os.File
	w    *bufio.Writer
	line []byte
	err  error
	// last holds an updating result's last value per identity (nil: a
	// tombstone deleted it).
	last map[string][]byte
	keys map[string][]byte
	id   []byte
}

func newResultWriter(dir string, q queries.Query) (*resultWriter, error) {
	if len(q.Result.Columns) == 0 || q.Result.Rows == nil {
		return nil, fmt.Errorf("bench: --results: query %s describes no result rows", q.Name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: --results: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, q.Name+".jsonl"))
	if err != nil {
		return nil, fmt.Errorf("bench: --results: %w", err)
	}
	w := &resultWriter{res: q.Result, f: f, w: bufio.NewWriterSize(f, 1<<16)}
	if q.Result.Upsert {
		w.last, w.keys = make(map[string][]byte), make(map[string][]byte)
	}
	return w, nil
}

// add takes one output record; its slices are the caller's.
func (w *resultWriter) add(key, value []byte) {
	if w.err != nil {
		return
	}
	if w.last == nil {
		w.rows(key, value)
		return
	}
	w.id = w.id[:0]
	if w.res.Identity != nil {
		w.id = w.res.Identity(w.id, key, value)
	} else {
		w.id = append(w.id, key...)
	}
	id := string(w.id)
	if value == nil {
		w.last[id] = nil
		return
	}
	w.last[id] = append(w.last[id][:0], value...)
	if _, ok := w.keys[id]; !ok {
		w.keys[id] = append([]byte(nil), key...)
	}
}

// rows writes the rows of record (key, value).
func (w *resultWriter) rows(key, value []byte) {
	err := w.res.Rows(key, value, func(values ...any) {
		b := append(w.line[:0], '{')
		for i, v := range values {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendQuote(b, w.res.Columns[i])
			b = append(b, ':')
			switch v := v.(type) {
			case int64:
				b = strconv.AppendInt(b, v, 10)
			case nil:
				b = append(b, "null"...)
			default:
				s, err := json.Marshal(v)
				if err != nil && w.err == nil {
					w.err = err
				}
				b = append(b, s...)
			}
		}
		w.line = append(b, '}', '\n')
		if _, err := w.w.Write(w.line); err != nil && w.err == nil {
			w.err = err
		}
	})
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("record %x: %w", key, err)
	}
}

// close writes an updating result's rows and closes the file.
func (w *resultWriter) close() error {
	for _, id := range slices.Sorted(maps.Keys(w.last)) {
		if v := w.last[id]; v != nil {
			w.rows(w.keys[id], v)
		}
	}
	if err := w.w.Flush(); err != nil && w.err == nil {
		w.err = err
	}
	if err := w.f.Close(); err != nil && w.err == nil {
		w.err = err
	}
	if w.err != nil {
		return fmt.Errorf("bench: --results: %w", w.err)
	}
	return nil
}
