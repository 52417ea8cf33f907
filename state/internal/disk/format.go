package disk

import (
	"encoding/binary"
	"fmt"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/internal/keys"
	"github.com/eddy-streams/eddy/state/internal/offsetcodec"
)

// Format versions of a task database (state/internal/keys describes each).
// Like Pebble's format major versions they only grow: Open ratchets an
// older database up to FormatNewest one version at a time, and refuses one
// newer than FormatNewest or older than FormatMinSupported.
const (
	// FormatV1 is the unversioned layout: offsets under 'm', before the
	// stores. A database without a format key is of this format.
	FormatV1 = 1
	// FormatV2 moves the offsets after the stores and writes the format.
	FormatV2 = 2

	FormatNewest       = FormatV2
	FormatMinSupported = FormatV1
)

// V1Guard is what format 1's offsets key holds in a format 2 database: a
// value that an eddy from before versioned formats cannot decode (offsets
// version 0xff). Such an eddy, started on a newer database (a rollback),
// then takes it for corrupt and rebuilds it from the changelog, instead of
// reading a database without offsets as new and replaying the whole
// changelog over stores that are full. It is written once, at creation or
// migration, so it sits in one table and is not in every flush, which is
// what moving the offsets after the stores was for.
var V1Guard = []byte{0xff}

// ReadFormat returns the format of the database r reads: FormatV1 when it
// has no format key. A format key that does not decode is damage.
func ReadFormat(r Reader) (int, error) {
	v, ok, err := r.Get(keys.Format())
	if err != nil {
		return 0, err
	}
	if !ok {
		return FormatV1, nil
	}
	f, n := binary.Uvarint(v)
	if n <= 0 || n != len(v) || f == 0 || f > 1<<20 {
		return 0, fmt.Errorf("%w: format key holds %x, not a format version", state.ErrCorrupt, v)
	}
	return int(f), nil
}

// AppendFormat appends the encoding of format f, as the format key holds it.
func AppendFormat(dst []byte, f int) []byte { return binary.AppendUvarint(dst, uint64(f)) }

// checkFormat refuses a format this eddy cannot read or migrate.
func checkFormat(dir string, f int) error {
	const fix = "delete the directory (the task rebuilds it from its changelog, or from a checkpoint)"
	switch {
	case f > FormatNewest:
		return fmt.Errorf("%w: task database %s is in state format %d, newer than this eddy's (formats %d to %d): run an eddy release that reads format %d, or %s",
			state.ErrFormat, dir, f, FormatMinSupported, FormatNewest, f, fix)
	case f < FormatMinSupported:
		return fmt.Errorf("%w: task database %s is in state format %d, which this eddy no longer migrates (formats %d to %d): %s",
			state.ErrFormat, dir, f, FormatMinSupported, FormatNewest, fix)
	}
	return nil
}

// Open checks the format of the database just opened in dir, migrates it
// to FormatNewest if it is older, and returns its offsets. A new, empty
// database is of FormatV1 and gets the format key written. Each migration
// is one atomic batch, so a crash leaves the database in one format or the
// next, and the next Open carries on.
func Open(e Engine, dir string) (state.Offsets, error) {
	f, err := ReadFormat(e)
	if err != nil {
		return state.Offsets{}, err
	}
	if err := checkFormat(dir, f); err != nil {
		return state.Offsets{}, err
	}
	if f == FormatV1 {
		if err := migrateV1(e); err != nil {
			return state.Offsets{}, fmt.Errorf("migrate from state format 1: %w", err)
		}
	}
	return readOffsets(e, keys.Offsets())
}

// ReadOffsets returns the offsets and the format of the database r reads,
// of any format Open accepts, without migrating it: for a database opened
// read-only (state/pebble's Inspect).
func ReadOffsets(r Reader, dir string) (state.Offsets, int, error) {
	f, err := ReadFormat(r)
	if err != nil {
		return state.Offsets{}, 0, err
	}
	if err := checkFormat(dir, f); err != nil {
		return state.Offsets{}, f, err
	}
	key := keys.Offsets()
	if f == FormatV1 {
		key = keys.OffsetsV1()
	}
	o, err := readOffsets(r, key)
	return o, f, err
}

// migrateV1 moves format 1's offsets to format 2's key and stamps the
// format. The offsets are checked first: damaged ones are not carried into
// a database that would then look sound.
func migrateV1(e Engine) error {
	old, ok, err := e.Get(keys.OffsetsV1())
	if err != nil {
		return err
	}
	if ok {
		if _, err := offsetcodec.Decode(old); err != nil {
			return fmt.Errorf("%w: offsets: %w", state.ErrCorrupt, err)
		}
	}
	return e.Write(0, func(w Writer) error {
		if ok {
			if err := w.Set(keys.Offsets(), old); err != nil {
				return err
			}
		}
		if err := w.Set(keys.OffsetsV1(), V1Guard); err != nil {
			return err
		}
		return w.Set(keys.Format(), AppendFormat(nil, FormatV2))
	})
}

// readOffsets reads the offsets under key; a database without them (a new
// one) reflects no offsets and no stream time.
func readOffsets(r Reader, key []byte) (state.Offsets, error) {
	v, ok, err := r.Get(key)
	if err != nil {
		return state.Offsets{}, err
	}
	if !ok {
		return state.NewOffsets(), nil
	}
	o, err := offsetcodec.Decode(v)
	if err != nil {
		return state.Offsets{}, fmt.Errorf("%w: offsets: %w", state.ErrCorrupt, err)
	}
	return o, nil
}
