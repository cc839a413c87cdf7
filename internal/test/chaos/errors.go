package chaos

import "errors"

// ErrSchedule is returned by Parse and Schedule.Validate for a schedule
// that cannot be run: a bad line, an unknown kind, a member out of range,
// an action outside the span.
var ErrSchedule = errors.New("chaos: bad schedule")
