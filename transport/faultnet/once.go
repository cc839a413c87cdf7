package faultnet

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// callLoss is a pending one-shot loss: the responses to the next count Calls
// of method on a link.
type callLoss struct {
	link   link
	method string
}

// LoseCallResponses loses the responses to the next count Calls of method
// made by the member at from to the member at to (both advertised
// addresses): each request is delivered and handled, and its caller gets
// transport.ErrIndeterminate wrapping ErrInjected, whatever the other rules say.
// It is for tests that need one unknown outcome at a known point (a
// propose that applied but whose answer never came back).
func (n *Network) LoseCallResponses(from, to raft.ServerAddress, method string, count int) {
	n.set(func() {
		if n.callLosses == nil {
			n.callLosses = make(map[callLoss]int)
		}
		n.callLosses[callLoss{link{from, to}, method}] += count
	})
}

// takeCallLoss consumes one pending loss of a response to method on from->to
// and counts it, reporting whether there was one.
func (n *Network) takeCallLoss(from, to raft.ServerAddress, method string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := callLoss{link{from, to}, method}
	if n.callLosses[k] == 0 {
		return false
	}
	n.callLosses[k]--
	n.statsLocked(statKey{KindCall, k.link}).Lost++
	return true
}

// lostOnce is the error of a response lost by LoseCallResponses.
func lostOnce(addr, method string) error {
	return indeterminate(addr, method, fmt.Errorf("%w: response lost (LoseCallResponses)", ErrInjected))
}
