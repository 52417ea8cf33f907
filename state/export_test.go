package state

// Limits exported for buffer_test.go, which is an external test package so
// that it can use the memory backend.
const (
	MaxRetainedSlots = maxRetainedSlots
	MaxRetainedBytes = maxRetainedBytes
)

// RetainedSlots returns how many keys s remembers, dirty or not.
func (s *StoreBuffer) RetainedSlots() int { return len(s.slots) }
