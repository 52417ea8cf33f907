package registry

import "time"

// SetClock makes c read the time from now, so that a test moves past
// UnknownIDTTL without waiting.
func SetClock(c *Client, now func() time.Time) { c.now = now }
