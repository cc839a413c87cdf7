package fsm

import (
	"encoding/binary"
	"fmt"
)

// Outcome is what a submit did with one job of its batch.
type Outcome uint8

// Outcomes. Values are part of the result encoding.
const (
	OutcomeInvalid   Outcome = iota
	OutcomeCreated           // a new job was created
	OutcomeDuplicate         // the ID or idempotency key exists: Job is the existing job
	OutcomeRejected          // the job was refused: Code says why, nothing was created
	numOutcomes
)

func (o Outcome) String() string {
	switch o {
	case OutcomeCreated:
		return "created"
	case OutcomeDuplicate:
		return "duplicate"
	case OutcomeRejected:
		return "rejected"
	}
	return "invalid"
}

// Submitted is the outcome of one job of a submit batch, in batch order.
type Submitted struct {
	Outcome Outcome
	Code    Code   // refusal code when Outcome is OutcomeRejected
	Detail  string // refusal detail
	Job     Job    // the created or existing job, without Payload (zero when rejected)
}

// Err returns the refusal error for a rejected job, nil otherwise.
func (s *Submitted) Err() error {
	if s.Code == CodeOK {
		return nil
	}
	return &refusal{code: s.Code, detail: s.Detail}
}

// Result is the decoded answer of Apply to one command.
type Result struct {
	Command CommandType // the command answered (CmdInvalid if undecodable)
	Index   uint64      // the raft index of the entry
	Code    Code        // CodeOK, or why the whole command was refused
	Detail  string      // refusal detail, for humans

	Submitted []Submitted // submit: one per job, in batch order
	// Jobs: claim: the claimed jobs with their payload and lease, best
	// first; extend, ack, nak, term, cancel, retry: the job after the
	// command, without payload.
	Jobs    []Job
	Expired []string // expire: IDs of expired leases' jobs, in expiry order
	Removed uint64   // sweep: jobs removed
	// Changed: pause, resume, set/clear limit, set/clear rate: whether
	// the queue's state changed; ack, nak,
	// term: false when the command repeated the very request that ended
	// the lease (idempotent: nothing changed, Jobs holds the job as it is); claim:
	// false when it repeated a claim with the same ID whose leases are
	// still running (Jobs holds them, nothing changed).
	Changed bool
	// Batch: batch: one result per command of the batch, in order (each
	// with its own Code).
	Batch []Result
	// Cascade: the jobs the command moved through dependencies and
	// batches (deps.go), in the order it moved them: dependents released
	// or failed, breadth first from the jobs it ended, then the completion
	// jobs of the batches it completed. Without payloads.
	Cascade []Cascaded
	// Completed: the batches the command completed, in ID order.
	Completed []BatchInfo
	// Schedule: schedule, schedule-set: the schedule after the command
	// (a delete: as it was). Changed: whether it changed (a create
	// repeated: false).
	Schedule *Schedule
	// Fired: fire: the IDs of the jobs created, in order. Changed: some
	// schedule was due.
	Fired []string
}

// Err returns nil if the command was applied, else an error wrapping the
// sentinel of Code (use errors.Is).
func (r *Result) Err() error {
	if r.Code == CodeOK {
		return nil
	}
	return &refusal{code: r.Code, detail: r.Detail}
}

// Result encoding, version 4:
//
//	version (byte) | command type (byte) | code (byte) | index (uvarint) |
//	detail (str) | body, only when code is OK:
//	  submit: count, then per job: outcome (byte), code (byte), detail (str),
//	          job record without payload (only for created/duplicate)
//	  claim, extend, ack, nak, term, cancel, retry: count, job records
//	          (with payload for claim, without otherwise)
//	  ack, nak, term, claim: then changed (byte 0/1)
//	  expire: count, ids (str)      sweep: removed (uvarint)
//	  pause, resume, set/clear limit, set/clear rate: changed (byte 0/1)
//	  batch: count, then per command: length (uvarint), its result
//	         (this encoding, recursively; lease commands only)
//
// Version 1 had no changed byte after ack, nak and term (they always
// changed the job) and no job record flag 4; version 2 no changed byte
// after a claim and no job record flag 8, nor batch results; version 3 no
// job record flag 16 (a lease end's request sum). Results of this
// release's limit commands (limit.go) and job records with flag 64 (a
// unique key, unique.go) keep version 4: an older build neither proposes
// those commands nor reads those records. DecodeResult still reads them
// all.
const (
	ResultVersion   = 4
	resultVersionV3 = 3
	resultVersionV2 = 2
	resultVersionV1 = 1
)

func appendResult(b []byte, r *result) []byte {
	version := byte(ResultVersion)
	if r.code == CodeOK && r.hasDeps() {
		version = resultVersionDeps
	}
	b = append(b, version, byte(r.cmd), byte(r.code))
	b = binary.AppendUvarint(b, r.index)
	b = appendStr(b, r.detail)
	if r.code != CodeOK {
		return b
	}
	switch r.cmd {
	case CmdSubmit:
		b = binary.AppendUvarint(b, uint64(len(r.subs)))
		for _, s := range r.subs {
			b = append(b, byte(s.outcome), byte(s.code))
			b = appendStr(b, s.detail)
			if s.job != nil {
				b = appendJob(b, s.job, false)
			}
		}
	case CmdClaim, CmdExtend, CmdAck, CmdNak, CmdTerm, CmdCancel, CmdRetry:
		b = binary.AppendUvarint(b, uint64(len(r.jobs)))
		for _, j := range r.jobs {
			b = appendJob(b, j, r.cmd == CmdClaim)
		}
		if r.cmd == CmdAck || r.cmd == CmdNak || r.cmd == CmdTerm || r.cmd == CmdClaim {
			b = appendBool(b, r.changed)
		}
	case CmdExpire:
		b = binary.AppendUvarint(b, uint64(len(r.expired)))
		for _, id := range r.expired {
			b = appendStr(b, id)
		}
	case CmdSweep:
		b = binary.AppendUvarint(b, r.removed)
	case CmdPause, CmdResume, CmdSetLimit, CmdClearLimit, CmdSetRate, CmdClearRate:
		b = appendBool(b, r.changed)
	case CmdSchedule, CmdScheduleSet, CmdFire:
		b = appendScheduleResult(b, r)
	case CmdBatch:
		b = binary.AppendUvarint(b, uint64(len(r.batch)))
		for _, sr := range r.batch {
			at := len(b)
			b = append(b, make([]byte, binary.MaxVarintLen32)...)
			b = appendResult(b, sr)
			b = putLen(b, at)
		}
	}
	if version == resultVersionDeps {
		b = appendResultDeps(b, r)
	}
	return b
}

// putLen turns the binary.MaxVarintLen32 bytes reserved at b[at:] into the
// uvarint length of what follows them, shifting it down if the length
// takes fewer bytes.
func putLen(b []byte, at int) []byte {
	start := at + binary.MaxVarintLen32
	n := len(b) - start
	var tmp [binary.MaxVarintLen32]byte
	k := binary.PutUvarint(tmp[:], uint64(n))
	copy(b[at:], tmp[:k])
	copy(b[at+k:], b[start:])
	return b[:at+k+n]
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// result is Apply's internal answer, encoded by appendResult.
type result struct {
	cmd     CommandType
	code    Code
	index   uint64
	detail  string
	subs    []sub
	jobs    []*job
	expired []string
	removed uint64
	changed bool
	batch   []*result
	// cascade and completed: what the command moved through dependencies
	// and batches (deps.go), encoded as result version 5.
	cascade   []cascaded
	completed []*group
	sched     *Schedule // schedule, schedule-set: the schedule after (a delete: before)
	fired     []string  // fire: the jobs created
}

type sub struct {
	outcome Outcome
	code    Code
	detail  string
	job     *job
}

// DecodeResult parses the bytes Apply returned (result version 4 to 1). An
// error (wrapping ErrInvalidResult or ErrUnsupportedVersion) means the
// bytes are not a result; a refused command decodes fine and reports
// itself via Result.Err.
func DecodeResult(b []byte) (Result, error) {
	var arena []byte
	return decodeResult(b, &arena, decodeAll)
}

// DecodeResultWithoutPayloads is DecodeResult for an observer that does
// not run the jobs: claimed jobs come without their payloads (not copied).
func DecodeResultWithoutPayloads(b []byte) (Result, error) {
	var arena []byte
	return decodeResult(b, &arena, decodeNoPayload)
}

// DecodeResultWithoutEndedJobs is DecodeResult for the proposer of acks,
// naks and terms, which reads only their codes and Changed: their results
// (alone or in a batch) come without the job record (Jobs nil; the record
// is still checked). Every other result decodes as DecodeResult decodes
// it.
func DecodeResultWithoutEndedJobs(b []byte) (Result, error) {
	var arena []byte
	return decodeResult(b, &arena, decodeLean)
}

// decodeMode is how decodeResult treats job records.
type decodeMode uint8

const (
	decodeAll       decodeMode = iota
	decodeNoPayload            // records without payloads (not copied)
	decodeLean                 // ack, nak and term results without records
)

// decodeResult is DecodeResult with the strings' arena shared (a batch's
// results decode into one), treating records as mode says.
func decodeResult(b []byte, arena *[]byte, mode decodeMode) (Result, error) {
	var r Result
	if len(b) < 3 {
		return r, fmt.Errorf("%w: %d bytes", ErrInvalidResult, len(b))
	}
	version := b[0]
	if version < resultVersionV1 || version > resultVersionDeps {
		return r, fmt.Errorf("%w: result version %d", ErrUnsupportedVersion, b[0])
	}
	r.Command, r.Code = CommandType(b[1]), Code(b[2])
	if r.Command >= numCmds || r.Code >= numCodes {
		return Result{}, fmt.Errorf("%w: command %d code %d", ErrInvalidResult, b[1], b[2])
	}
	d := decoder{b: b[3:], pooled: true, arena: *arena, noPayload: mode == decodeNoPayload} // the jobs' strings share chunks
	defer func() { *arena = d.arena }()
	r.Index = d.uvarint()
	r.Detail = d.str()
	if r.Code == CodeOK {
		switch r.Command {
		case CmdSubmit:
			n := d.count(MaxSubmit, 3)
			r.Submitted = make([]Submitted, n)
			for i := range r.Submitted {
				s := &r.Submitted[i]
				s.Outcome, s.Code = Outcome(d.byte()), Code(d.byte())
				s.Detail = d.str()
				if s.Outcome == OutcomeInvalid || s.Outcome >= numOutcomes || s.Code >= numCodes {
					d.fail("outcome %d code %d", s.Outcome, s.Code)
				}
				if s.Outcome != OutcomeRejected && d.err == nil {
					s.Job = decodePublic(&d, false)
				}
			}
		case CmdClaim, CmdExtend, CmdAck, CmdNak, CmdTerm, CmdCancel, CmdRetry:
			n := d.count(MaxClaim, 20)
			ends := r.Command == CmdAck || r.Command == CmdNak || r.Command == CmdTerm
			if mode == decodeLean && ends {
				// Read in place, nothing kept.
				v := decoder{b: d.b, err: d.err, view: true, noPayload: true}
				for i := 0; i < n && v.err == nil; i++ {
					var rec job
					var c class
					decodeJobInto(&v, &rec, &c)
				}
				d.b, d.err = v.b, v.err
			} else {
				r.Jobs = make([]Job, 0, n)
				for i := 0; i < n && d.err == nil; i++ {
					r.Jobs = append(r.Jobs, decodePublic(&d, r.Command == CmdClaim))
				}
			}
			switch {
			case ends:
				r.Changed = version == resultVersionV1 || d.bool()
			case r.Command == CmdClaim:
				r.Changed = version < resultVersionV3 || d.bool()
			}
		case CmdExpire:
			n := d.count(len(d.b), 1)
			r.Expired = make([]string, n)
			for i := range r.Expired {
				r.Expired[i] = d.str()
			}
		case CmdSweep:
			r.Removed = d.uvarint()
		case CmdPause, CmdResume, CmdSetLimit, CmdClearLimit, CmdSetRate, CmdClearRate:
			r.Changed = d.bool()
		case CmdSchedule, CmdScheduleSet, CmdFire:
			decodeScheduleResult(&d, &r)
		case CmdBatch:
			n := d.count(MaxBatch, 3)
			r.Batch = make([]Result, 0, n)
			for i := 0; i < n && d.err == nil; i++ {
				raw := d.raw()
				if d.err != nil {
					break
				}
				*arena = d.arena
				sr, err := decodeResult(raw, arena, mode)
				d.arena = *arena
				if err != nil {
					d.fail("batch result %d: %v", i, err)
					break
				}
				if !Batchable(sr.Command) || sr.Index != r.Index {
					d.fail("batch result %d: command %s index %d", i, sr.Command, sr.Index)
					break
				}
				r.Batch = append(r.Batch, sr)
			}
		}
		if version == resultVersionDeps {
			decodeResultDeps(&d, &r)
		}
	}
	d.end()
	if d.err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrInvalidResult, d.err)
	}
	return r, nil
}

// ResultHead reads the head of the bytes Apply returned without decoding
// the rest: the command's type and the result's code (CodeOK: applied).
// ok is false when b is too short to be a result.
func ResultHead(b []byte) (cmd CommandType, code Code, ok bool) {
	if len(b) < 3 {
		return 0, 0, false
	}
	return CommandType(b[1]), Code(b[2]), true
}

// ScanBatch reads the result Apply returned for a batch entry without
// decoding it: it reports whether one of the batch's commands put a job
// back in its queue (a nak that changed it: the only batchable command that
// does), which is when waiting claimers must look again, and, when ids is
// not nil, calls it with the ID of every job record of the batch's
// successful commands, in order (a view of b, valid while b is; ids returns
// false to be called no more). It is meant for what Apply just returned: it
// checks the framing, each command's header and, with ids, the records it
// reads (DecodeResult checks everything). A lease command's result
// (claim, extend, ack, nak, term) proposed alone reads as a batch of one.
// ok is false when b is not a successful batch or lease command result of
// this version or does not read.
func ScanBatch(b []byte, ids func(id string) bool) (requeues, ok bool) {
	if ids == nil {
		return ScanBatchStates(b, nil)
	}
	return ScanBatchStates(b, func(id string, _ State) bool { return ids(id) })
}

// ScanBatchStates is ScanBatch calling jobs, when not nil, with the ID and
// the state of every job record of the batch's successful commands (the
// job as the command left it).
func ScanBatchStates(b []byte, jobs func(id string, state State) bool) (requeues, ok bool) {
	if len(b) < 3 || b[0] != ResultVersion || Code(b[2]) != CodeOK {
		return false, false
	}
	if CommandType(b[1]) != CmdBatch {
		return scanLease(b, &jobs, true) // a lease command proposed alone: a batch of one
	}
	d := decoder{b: b[3:]}
	d.uvarint() // index
	d.raw()     // detail
	n := d.count(MaxBatch, 3)
	for i := 0; i < n && d.err == nil; i++ {
		sub := d.raw()
		if d.err != nil {
			return false, false
		}
		r, ok := scanLease(sub, &jobs, false)
		if !ok {
			return false, false
		}
		requeues = requeues || r
	}
	if d.err != nil || len(d.b) != 0 {
		return false, false
	}
	return requeues, true
}

// scanLease is ScanBatchStates for one lease command's result, alone (its
// records are then all read, and its end checked) or in a batch (whose
// framing bounds it); *jobs is set to nil once it returned false.
func scanLease(b []byte, jobs *func(id string, state State) bool, alone bool) (requeues, ok bool) {
	if len(b) < 4 || b[0] != ResultVersion || !Batchable(CommandType(b[1])) || Code(b[2]) >= numCodes {
		return false, false
	}
	if Code(b[2]) != CodeOK {
		return false, true
	}
	// A nak that succeeded ends with its changed flag.
	requeues = CommandType(b[1]) == CmdNak && b[len(b)-1] == 1
	if *jobs == nil && !alone {
		return requeues, true
	}
	d := decoder{b: b[3:], view: true, noPayload: true}
	d.uvarint() // index
	d.raw()     // detail
	k := d.count(MaxClaim, 20)
	for j := 0; j < k && d.err == nil; j++ {
		var rec job
		var c class
		decodeJobInto(&d, &rec, &c)
		if d.err == nil && *jobs != nil && !(*jobs)(rec.id, rec.state) {
			*jobs = nil
			if !alone {
				break
			}
		}
	}
	if alone && CommandType(b[1]) != CmdExtend {
		d.byte() // changed
	}
	if d.err != nil || (alone && len(d.b) != 0) {
		return false, false
	}
	return requeues, true
}

// ScanSubmit reads the result Apply returned for a submit entry without
// decoding it: it calls fn with the queue and kind of every job the submit
// created pending (claimable at once unless a limit holds it back), in
// order (views of b, valid while b is). It is meant for what Apply just
// returned: it checks the framing and the records it reads (DecodeResult
// checks everything). ok is false when b is not a successful submit result
// of this version (a submit that named dependencies answers in another) or
// does not read; fn may have been called for some jobs then.
func ScanSubmit(b []byte, fn func(queue, kind string)) (ok bool) {
	if len(b) < 3 || b[0] != ResultVersion || CommandType(b[1]) != CmdSubmit || Code(b[2]) != CodeOK {
		return false
	}
	d := decoder{b: b[3:], view: true, noPayload: true}
	d.uvarint() // index
	d.raw()     // detail
	n := d.count(MaxSubmit, 3)
	for i := 0; i < n && d.err == nil; i++ {
		o, code := Outcome(d.byte()), Code(d.byte())
		d.raw() // detail
		if o == OutcomeInvalid || o >= numOutcomes || code >= numCodes {
			return false
		}
		if o == OutcomeRejected {
			continue
		}
		var rec job
		var c class
		decodeJobInto(&d, &rec, &c)
		if d.err == nil && o == OutcomeCreated && rec.state == StatePending {
			fn(c.queue, c.kind)
		}
	}
	return d.err == nil && len(d.b) == 0
}
