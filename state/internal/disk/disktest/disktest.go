// Package disktest gives the disk backends' tests raw access to a
// database, below the store layout, in the shape statetest.Disk wants it:
// the suite plants damaged metadata and older formats with it.
package disktest

import (
	"testing"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/internal/disk"
)

// Raw returns statetest.Disk's GetRaw and SetRaw for a backend whose
// databases engine turns into a disk.Engine.
func Raw(engine func(state.DB) disk.Engine) (
	get func(t *testing.T, db state.DB, key []byte) ([]byte, bool),
	set func(t *testing.T, db state.DB, key, value []byte),
) {
	get = func(t *testing.T, db state.DB, key []byte) ([]byte, bool) {
		t.Helper()
		v, ok, err := engine(db).Get(key)
		if err != nil {
			t.Fatal(err)
		}
		return v, ok
	}
	set = func(t *testing.T, db state.DB, key, value []byte) {
		t.Helper()
		err := engine(db).Write(0, func(w disk.Writer) error {
			if value == nil {
				return w.Delete(key)
			}
			return w.Set(key, value)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return get, set
}
