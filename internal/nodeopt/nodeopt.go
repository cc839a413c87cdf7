// Package nodeopt holds the options of raft.Open and jobraft.Open that only
// this module's own code can pass: instrumentation for its tests, kept out
// of the public Config types. A caller outside the module cannot name the
// Option type, so for it both Open functions take no options.
package nodeopt

import "github.com/jobraft/jobraft/internal/history"

// Option sets one internal option.
type Option func(*Options)

// Options are the collected options. The zero value changes nothing.
type Options struct {
	// Applied, when set, receives the member's applied history (see
	// internal/history): a Started record when the node opens, then what
	// its state machine applies and restores.
	Applied history.Sink
}

// Applied records the member's applied history into s.
func Applied(s history.Sink) Option { return func(o *Options) { o.Applied = s } }

// Collect applies opts in order.
func Collect(opts []Option) Options {
	var o Options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}
