// Package plan lets the tools that sit beside package eddy — the eddytest
// driver and the harness's in-process runner — build a public
// eddy.Topology into what the runtime executes, without an exported
// method of package eddy whose signature names the runtime's types.
//
// Package eddy registers its builder once, at init; a program that imports
// eddytest or the harness imports eddy too, so the builder is always set
// before Build can be called. Go's visibility rules leave no way for a
// package beside eddy to reach its unexported build step other than such a
// registration (gRPC's internal hooks are the same idea).
package plan

import (
	"errors"
	"sync"

	"github.com/eddy-streams/eddy/internal/runtime"
)

// Builder builds topology (an *eddy.Topology) with config (an
// eddy.Config): defaults applied, as App.Run would run it.
type Builder func(topology, config any) (runtime.Topology, error)

var (
	mu      sync.RWMutex
	builder Builder
)

// Register sets the builder; package eddy calls it from its init.
func Register(b Builder) {
	mu.Lock()
	defer mu.Unlock()
	builder = b
}

// Build builds topology with config through the registered builder.
func Build(topology, config any) (runtime.Topology, error) {
	mu.RLock()
	b := builder
	mu.RUnlock()
	if b == nil {
		return runtime.Topology{}, errors.New("eddy: internal/plan: package eddy registered no builder")
	}
	return b(topology, config)
}
