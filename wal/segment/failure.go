package segment

// Failure classes: what made a log fail closed (Store.Failure). They name
// the operation, never the data.
const (
	// FailSync: an fsync of a segment, a mark or the directory failed.
	FailSync = "sync"
	// FailWrite: a write (or a segment's creation) failed.
	FailWrite = "write"
	// FailNoSpace: a write or sync found the disk full (ENOSPC).
	FailNoSpace = "no_space"
)

// Failure returns the class of the failure that closed the log (FailSync,
// FailWrite, FailNoSpace), or "" while the log has not failed. A failed
// log stays failed until it is reopened.
func (l *Store) Failure() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failClass
}
