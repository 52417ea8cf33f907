package state

// RetainedSlots returns how many slots s has, dirty, cached or free.
func (s *StoreBuffer) RetainedSlots() int { return s.slots.Len() }
