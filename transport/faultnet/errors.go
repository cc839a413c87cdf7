package faultnet

import (
	"errors"

	"github.com/jobraft/jobraft/transport"
)

// ErrInjected is the cause of every failure produced by a Network.
var ErrInjected = errors.New("faultnet: fault injected")

// notDelivered is a refused call: the handler did not run.
func notDelivered(addr, method string, err error) error {
	return &transport.CallError{Class: transport.ErrNotDelivered, Op: "fault", Addr: addr, Method: method, Err: err}
}

// indeterminate is a call whose response was lost: the handler may have run.
func indeterminate(addr, method string, err error) error {
	return &transport.CallError{Class: transport.ErrIndeterminate, Op: "fault", Addr: addr, Method: method, Err: err}
}
