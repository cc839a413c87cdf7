package catchup

import "errors"

// Refusals of a snapshot-past request (CheckSnapshotPast).
var (
	// ErrPastNotMember: the asking member is not in the configuration.
	ErrPastNotMember = errors.New("catchup: snapshot-past request from a non-member")
	// ErrPastUnproven: the index asked for is past what the member's own
	// progress report shows it was ever told of.
	ErrPastUnproven = errors.New("catchup: snapshot-past request beyond the member's own last index")
	// ErrPastTooFar: the index is too far past the leader's log.
	ErrPastTooFar = errors.New("catchup: snapshot-past request too far past the leader's log")
	// ErrPastRateLimited: the member was granted one too recently.
	ErrPastRateLimited = errors.New("catchup: snapshot-past request rate-limited")
)
