package state

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidStoreName is wrapped by the error a backend returns when a Write
// names a store it cannot represent.
var ErrInvalidStoreName = errors.New("state: invalid store name")

// CheckStoreName reports whether name can be used as a store name. Backends
// lay out keys as store name, a 0x00 separator, then the user key, so a name
// must be non-empty (an empty name would share its prefix space with the
// separator) and must not contain 0x00 (one store's keys would otherwise
// fall inside another store's range). Every backend applies the same rule so
// that a topology that works on the memory backend also works on Pebble.
func CheckStoreName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidStoreName)
	}
	if strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("%w: %q contains a 0x00 byte", ErrInvalidStoreName, name)
	}
	return nil
}
