package console

import "time"

// SetLoginClock makes c's login throttling read the time from now. Call it
// before c serves.
func SetLoginClock(c *Console, now func() time.Time) { c.logins = newLoginThrottle(now) }
