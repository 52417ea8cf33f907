package disk

import (
	"bytes"
	"errors"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/internal/keys"
	"github.com/eddy-streams/eddy/state/internal/offsetcodec"
)

// errNilBatch is Encode's answer to a nil batch.
var errNilBatch = errors.New("nil batch")

// Encoder turns a state.Batch into the operations of one engine batch. It
// keeps its scratch buffers from batch to batch, so, like the database it
// serves, it is used by one goroutine at a time.
type Encoder struct {
	key  []byte
	meta []byte
}

// Encode adds b to w: its ranges, then its writes, then its offsets. Both
// engines number a batch's operations in the order they were added, and a
// range tombstone deletes only keys with lower numbers, so the writes
// survive the ranges, as state.Batch specifies. An invalid store name
// fails Encode before the engine commits anything.
func (e *Encoder) Encode(w Writer, b *state.Batch) error {
	if b == nil {
		return errNilBatch
	}
	for _, r := range b.Ranges {
		if err := state.CheckStoreName(r.Store); err != nil {
			return err
		}
		if len(r.Upper) != 0 && bytes.Compare(r.Lower, r.Upper) >= 0 {
			continue // empty, and both engines want start < end
		}
		// Both bounds in the one scratch buffer; the Writer copies them.
		e.key = keys.Append(e.key[:0], r.Store, r.Lower)
		n := len(e.key)
		if len(r.Upper) == 0 {
			e.key = keys.AppendStoreEnd(e.key, r.Store)
		} else {
			e.key = keys.Append(e.key, r.Store, r.Upper)
		}
		if err := w.DeleteRange(e.key[:n], e.key[n:]); err != nil {
			return err
		}
	}
	for _, wr := range b.Writes {
		if err := state.CheckStoreName(wr.Store); err != nil {
			return err
		}
		e.key = keys.Append(e.key[:0], wr.Store, wr.Key)
		var err error
		if wr.Delete {
			err = w.Delete(e.key)
		} else {
			err = w.Set(e.key, wr.Value)
		}
		if err != nil {
			return err
		}
	}
	e.meta = offsetcodec.Append(e.meta[:0], b.Offsets)
	return w.Set(keys.Offsets(), e.meta)
}
