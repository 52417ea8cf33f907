//go:build !rocksdb

package rocksdb

import "github.com/eddy-streams/eddy/state"

// Backend is, in a program built without the rocksdb build tag, a backend
// that opens nothing: Open and Destroy return ErrNotBuilt.
type Backend struct{}

var _ state.Backend = (*Backend)(nil)

// New returns a Backend. Built without the rocksdb tag, every Open fails
// with ErrNotBuilt.
func New(Options) *Backend { return &Backend{} }

// Open returns ErrNotBuilt.
func (*Backend) Open(dir string) (state.DB, error) { return nil, ErrNotBuilt }

// Destroy returns ErrNotBuilt, like Open: the caller is about to rebuild a
// database it cannot open.
func (*Backend) Destroy(dir string) error { return ErrNotBuilt }

// Close does nothing.
func (*Backend) Close() error { return nil }

// CacheMetrics returns zeros: there is no cache.
func (*Backend) CacheMetrics() state.CacheMetrics { return state.CacheMetrics{} }
