package fsm

import "strings"

// class is what a job shares with the other jobs of its queue and kind
// submitted with the same retry policy: the queue, the kind, the backoff
// policy (defaults applied) and the maximum attempts, none of which a job
// changes. The record points to its class instead of holding two strings,
// a policy pointer and a count (the record stays in its size class:
// TestRecordSizes), and a live record's class names its live queue, so a
// transition finds the job's queue without a lookup by name.
//
// Classes are interned per queue (queue.classes) and count their live
// jobs: the queue drops a class with its last job, so hostile input cannot
// grow them beyond the jobs held. A class is immutable but for n, which
// only the apply goroutine touches: snapshots share the records, hence
// their classes, and read only the immutable fields. A decoded record not
// placed in a state (a snapshot's being restored, before put; a result's;
// one being verified) has a class of its own, q nil. No result, order or
// encoding depends on which class struct a record points to.
type class struct {
	queue string // the queue's name (the live queue's bytes once interned)
	classKey
	q *queue // the live queue, nil for a decoded record's class
	n int    // live jobs of the class (interned classes only)
}

// classKey is a class's key among its queue's classes.
type classKey struct {
	kind   string
	bo     Backoff
	maxAtt uint32
}

// keyOf is the class key of a job submitted with kind, policy bo (defaults
// applied) and max attempts maxAtt (0: the default).
func keyOf(kind string, bo Backoff, maxAtt uint32) classKey {
	if maxAtt == 0 {
		maxAtt = DefaultMaxAttempts
	}
	return classKey{kind: kind, bo: bo, maxAtt: maxAtt}
}

// class returns q's class of key k, making it (with no job yet) if q has
// none. A known class costs no allocation.
func (s *state) class(q *queue, k classKey) *class {
	if c, ok := q.classes[k]; ok {
		return c
	}
	k.kind = s.intern(k.kind)
	c := &class{queue: q.name, classKey: k, q: q}
	q.classes[k] = c
	return c
}

// intern returns the interned copy of kind, or (beyond maxInterned kinds)
// a copy of its own: never the caller's bytes (a decoder's chunk).
func (s *state) intern(kind string) string {
	if k, ok := s.kinds[kind]; ok {
		return k
	}
	if s.kinds == nil {
		s.kinds = map[string]string{}
	}
	kind = strings.Clone(kind)
	if len(s.kinds) < maxInterned {
		s.kinds[kind] = kind
	}
	return kind
}
