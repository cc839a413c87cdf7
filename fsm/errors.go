package fsm

import (
	"errors"
	"fmt"
)

// Errors a command can be refused with. Apply never returns them directly:
// they travel inside the encoded Result as a Code, and Result.Err (or
// Code.Err) maps the code back to the sentinel so callers can use errors.Is.
// A refused command leaves the job state unchanged (only the applied index
// advances).
var (
	// ErrInvalidCommand: the command is malformed or truncated, or a field is
	// out of range (empty queue, TTL <= 0, reserved ID prefix, ...).
	// DecodeCommand returns it too.
	ErrInvalidCommand = errors.New("fsm: invalid command")
	// ErrUnknownCommand: the command type byte is not one this version knows.
	ErrUnknownCommand = errors.New("fsm: unknown command type")
	// ErrUnsupportedVersion: the command or result was encoded with a format
	// version this build does not read.
	ErrUnsupportedVersion = errors.New("fsm: unsupported encoding version")
	// ErrTooLarge: a payload, result, message, batch or name exceeds its cap
	// (see the Max* constants).
	ErrTooLarge = errors.New("fsm: too large")
	// ErrNotFound: the job ID names no job (never submitted, or removed by a
	// retention sweep).
	ErrNotFound = errors.New("fsm: job not found")
	// ErrStaleLease: ack, nak, extend or term carried a lease token that is
	// not the job's current one (the lease expired, the job was canceled or
	// re-claimed, or it is not running), and is not a repeat of the very
	// request that ended that lease (another ack of it with another result
	// is stale). The detail says how that lease ended: "job ID lease T
	// ended: acked" (naked, termed, expired, canceled, superseded), with
	// lengths or digests at most of the requests. Nothing changed; the
	// worker must drop the job.
	ErrStaleLease = errors.New("fsm: stale lease token")
	// ErrInvalidState: the command does not apply to the job's state (cancel
	// of a finished job, retry of a job that is not dead or canceled).
	ErrInvalidState = errors.New("fsm: invalid job state for command")
	// ErrQueuePaused: a claim named only paused queues.
	ErrQueuePaused = errors.New("fsm: queue paused")
	// ErrIndexNotIncreasing: Apply got an entry whose index is not above the
	// applied index (a replay). Lease tokens must be unique, so it is refused.
	ErrIndexNotIncreasing = errors.New("fsm: entry index not increasing")
	// ErrUnknownParent: a submitted job names a parent (NewJob.After) that
	// no job has, nor a job of the same submit that is created; or a
	// retry of a dependent whose unmet parent is no longer held.
	ErrUnknownParent = errors.New("fsm: unknown parent job")
	// ErrDependencyCycle: a submitted job names itself as a parent, or is
	// on (or depends on) a cycle of parents among the jobs of its submit.
	ErrDependencyCycle = errors.New("fsm: dependency cycle")
	// ErrParentFailed: a submitted (or retried) job names a parent that is
	// dead or canceled: it could never run.
	ErrParentFailed = errors.New("fsm: parent job failed")
	// ErrBatchExists: a submit names a batch (SubmitCmd.Batch) that
	// exists. Nothing of the submit applied; the detail says whether the
	// batch was created by the same request (BatchInfo.Sum).
	ErrBatchExists = errors.New("fsm: batch exists")
	// ErrBadCron: a schedule's cron expression does not parse (or names a
	// zone or an interval: those are fields of their own).
	ErrBadCron = errors.New("fsm: bad cron expression")
	// ErrBadInterval: a schedule's interval is out of [MinInterval,
	// MaxInterval], or it has neither an interval nor a cron expression.
	ErrBadInterval = errors.New("fsm: bad schedule interval")
	// ErrUnknownZone: LoadZone does not know the time zone's name.
	ErrUnknownZone = errors.New("fsm: unknown time zone")
	// ErrScheduleExists: a create names a schedule ID that exists with
	// another definition (a repeat of the same create succeeds, Changed
	// false).
	ErrScheduleExists = errors.New("fsm: schedule exists with another definition")
	// ErrScheduleNotFound: the schedule ID names no schedule.
	ErrScheduleNotFound = errors.New("fsm: schedule not found")
)

// Errors of queries, DecodeResult and Restore.
var (
	// ErrInvalidCursor: List got a cursor it did not produce.
	ErrInvalidCursor = errors.New("fsm: invalid list cursor")
	// ErrInvalidResult: DecodeResult got bytes that are not a result.
	ErrInvalidResult = errors.New("fsm: invalid result encoding")
	// ErrCorruptSnapshot: Restore read a stream that fails validation
	// (magic, checksum, record layout, invariants or digest). The previous
	// state is kept. Test with IsCorrupt.
	ErrCorruptSnapshot = errors.New("fsm: corrupt snapshot")
	// ErrSnapshotVersion: Restore read a snapshot of a format version this
	// build does not read. The previous state is kept.
	ErrSnapshotVersion = errors.New("fsm: unsupported snapshot version")
	// ErrSecondRead: VerifySnapshot needed to read the stream a second
	// time (a waiting job names a parent of a smaller ID, or two records'
	// fingerprints met) and was given no way to.
	ErrSecondRead = errors.New("fsm: verify: the stream must be read twice and cannot be reread")
)

// IsCorrupt reports whether err says that stored bytes (a snapshot) failed
// validation.
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorruptSnapshot) }

// Code is the refusal code carried in an encoded Result. CodeOK means the
// command was applied.
type Code uint8

// Codes. Their numeric values are part of the result encoding: never
// renumber, only append.
const (
	CodeOK Code = iota
	CodeInvalidCommand
	CodeUnknownCommand
	CodeUnsupportedVersion
	CodeTooLarge
	CodeNotFound
	CodeStaleLease
	CodeInvalidState
	CodeQueuePaused
	CodeIndexNotIncreasing
	CodeUnknownParent
	CodeDependencyCycle
	CodeParentFailed
	CodeBatchExists
	CodeBadCron
	CodeBadInterval
	CodeUnknownZone
	CodeScheduleExists
	CodeScheduleNotFound
	numCodes
)

var codeErrs = [numCodes]error{
	nil,
	ErrInvalidCommand,
	ErrUnknownCommand,
	ErrUnsupportedVersion,
	ErrTooLarge,
	ErrNotFound,
	ErrStaleLease,
	ErrInvalidState,
	ErrQueuePaused,
	ErrIndexNotIncreasing,
	ErrUnknownParent,
	ErrDependencyCycle,
	ErrParentFailed,
	ErrBatchExists,
	ErrBadCron,
	ErrBadInterval,
	ErrUnknownZone,
	ErrScheduleExists,
	ErrScheduleNotFound,
}

// Err returns the sentinel error for c (nil for CodeOK).
func (c Code) Err() error {
	if c >= numCodes {
		return fmt.Errorf("%w: code %d", ErrInvalidResult, c)
	}
	return codeErrs[c]
}

func (c Code) String() string {
	if c == CodeOK {
		return "ok"
	}
	if err := c.Err(); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("code(%d)", uint8(c))
}

// codeOf maps a sentinel (possibly wrapped) to its code.
func codeOf(err error) Code {
	for c := Code(1); c < numCodes; c++ {
		if errors.Is(err, codeErrs[c]) {
			return c
		}
	}
	return CodeInvalidCommand
}

// refusal is an error carrying a code and a detail message.
type refusal struct {
	code   Code
	detail string
}

func (r *refusal) Error() string { return r.code.Err().Error() + ": " + r.detail }
func (r *refusal) Unwrap() error { return r.code.Err() }

func refuse(c Code, format string, args ...any) *refusal {
	return &refusal{code: c, detail: fmt.Sprintf(format, args...)}
}
