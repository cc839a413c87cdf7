package main

import (
	"errors"
	"fmt"
	"net/http"
)

// Start-up refusals: start returns them (wrapped with the details) before
// the member opens its log; jobd exits 1 with the message.
var (
	// errClusterCert: the member's own certificate (-cluster-cert) does not
	// verify against -cluster-ca (another CA, expired, or not valid for
	// both TLS server and client use): peers would refuse every connection.
	errClusterCert = errors.New("member certificate does not verify against -cluster-ca")
	// errDataDirLocked: another process (or another daemon in this one)
	// holds the data dir's lock file.
	errDataDirLocked = errors.New("data dir in use")
	// errOtherCluster: the data dir was created for another cluster than
	// this start's -cluster-id (or the one derived from -peers).
	errOtherCluster = errors.New("data dir belongs to another cluster")
	// errOtherMember: the data dir was created for another member ID.
	errOtherMember = errors.New("data dir belongs to another member")
	// errSelfAddress: -peers gives this member's ID an address this member
	// does not listen on or advertise (two members started with one ID).
	errSelfAddress = errors.New("-peers gives this member's ID another address")
	// errBadIdentity: the data dir's identity file is unreadable or invalid.
	errBadIdentity = errors.New("invalid data dir identity file")
)

// clientError is a request refused before anything was proposed: every
// clientError means nothing changed. close asks for the connection to be
// closed after the reply (its body was not, or not entirely, read).
type clientError struct {
	code   int
	kind   string
	reason string
	close  bool
}

func (e *clientError) Error() string { return e.reason }

// bad is a 400 bad_request.
func bad(format string, args ...any) error {
	return &clientError{code: http.StatusBadRequest, kind: "bad_request", reason: fmt.Sprintf(format, args...)}
}
