package wal

// Failure classes: what made a log fail closed (Log.Failure). They name
// the operation, never the data.
const (
	// FailSync: an fsync of a segment, a mark or the directory failed.
	FailSync = "sync"
	// FailWrite: a write (or a segment's creation) failed.
	FailWrite = "write"
	// FailNoSpace: a write or sync found the disk full (ENOSPC).
	FailNoSpace = "no_space"
)

// OnFailure sets fn, called once when the log fails closed (every further
// write then returns ErrFailed until the log is reopened), with the
// failure's class. It runs on the failing writer's goroutine with the
// log's write lock held: it must be quick and must not call the log.
func OnFailure(fn func(class string)) Option { return func(o *options) { o.onFailure = fn } }

// Failure returns the class of the failure that closed the log (FailSync,
// FailWrite, FailNoSpace), or "" while the log has not failed. A failed
// log stays failed until it is reopened.
func (l *Log) Failure() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failClass
}
