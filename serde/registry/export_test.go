package registry

import "time"

// SetClock makes c read the time from now, so that a test moves past
// the unknown-id TTL without waiting.
func SetClock(c *Client, now func() time.Time) { c.now = now }

// SetFirstBackoff sets the wait after a request's first failure, so that
// a test knows a call is waiting there.
func SetFirstBackoff(c *Client, d time.Duration) { c.firstBackoff = d }
