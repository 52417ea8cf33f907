package registry

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/eddy-streams/eddy/serde"
)

// Found is what a registry-backed serde finds once and keeps: the schema
// it writes with (registered, looked up or the subject's latest). The
// per-record path is one atomic load. A refusal by the registry (an
// incompatible schema, a subject without it while auto-register is off)
// is kept too, so that failing records do not each ask the registry
// again; an unavailable registry (serde.ErrUnavailable) or a cancelled
// context is not: the next call tries again. The zero value is ready.
type Found[W any] struct {
	v   atomic.Pointer[W]
	mu  sync.Mutex // serializes find
	err error
}

// Get returns the kept value, or calls find (once at a time) to find it.
func (f *Found[W]) Get(ctx context.Context, find func(context.Context) (W, error)) (W, error) {
	if w := f.v.Load(); w != nil {
		return *w, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if w := f.v.Load(); w != nil {
		return *w, nil
	}
	var zero W
	if f.err != nil {
		return zero, f.err
	}
	w, err := find(ctx)
	if err != nil {
		if !errors.Is(err, serde.ErrUnavailable) && ctx.Err() == nil {
			f.err = err
		}
		return zero, err
	}
	f.v.Store(&w)
	return w, nil
}
