package jobmodel

import (
	"math"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Recorder collects a history from concurrent clients.
type Recorder struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

// NewRecorder starts a history.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Now returns the history's clock (call it just before sending an
// operation).
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// Add records an operation called at call. Operations whose outcome is
// Unknown are recorded as never returning (they may take effect at any
// point after their call).
func (r *Recorder) Add(client int, in Input, out Output, call int64) {
	ret := r.Now()
	if out.Outcome == Unknown {
		ret = math.MaxInt64
	}
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
	r.mu.Unlock()
}

// Ops returns a copy of the history.
func (r *Recorder) Ops() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]porcupine.Operation(nil), r.ops...)
}

// Check checks a history; the result is porcupine.Ok, Illegal or Unknown
// (timed out).
func Check(ops []porcupine.Operation, timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	return porcupine.CheckOperationsVerbose(Model.ToModel(), ops, timeout)
}
