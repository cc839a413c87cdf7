package fsm

import (
	"encoding/binary"
	"fmt"
	"time"
)

// Command format versions: the byte that starts every encoded command.
const (
	// FormatVersion is the version of every command in its original
	// layout: all types, and a claim without kinds.
	FormatVersion = 1
	// FormatVersionClaimKinds is the version of a claim that names kinds
	// (ClaimCmd.Kinds): the version 1 claim layout followed by the kinds.
	// Only claims take it, and only when they name kinds, so every command
	// a build without kinds could write encodes byte for byte as before.
	FormatVersionClaimKinds = 2
	// FormatVersionClaimID is the version of a claim that carries an ID
	// (ClaimCmd.ID): the version 2 layout, its kind count possibly 0,
	// then the ID.
	FormatVersionClaimID = 3
	// FormatVersionDeps is the version of a submit whose jobs name parents
	// or that makes a batch (NewJob.After, SubmitCmd.Batch): the version 1
	// layout followed by them (deps_codec.go). Only such submits take it.
	FormatVersionDeps = 4
	// FormatVersionSubmitExt is the version of a submit with a job that
	// carries unique options (NewJob.Unique): the version 4 layout, then
	// each job's extensions (unique.go). Only such submits take it.
	FormatVersionSubmitExt = 5
)

// Command encoding (all integers varint/uvarint, see codec.go):
//
//	+---------+------+------------------------------+
//	| version | type | fields of the command type   |
//	|  1 byte |1 byte| (no trailing bytes allowed)  |
//	+---------+------+------------------------------+
//
//	version 1:
//	submit: count, then per job: id, queue, kind, payload, priority(varint),
//	        runAt(ns varint), maxAttempts, backoff{base, max (varint ns),
//	        factor, jitter(byte)}, idempotencyKey
//	claim:  count, queues..., worker, max, ttl
//	extend: id, token, ttl          ack:  id, token, result
//	nak:    id, token, delay, error term: id, token, reason
//	cancel: id, reason              retry: id
//	expire: leaderSince             pause, resume: queue
//	sweep:  maxAge, maxPerQueue
//	batch:  count, then per command: length, an encoded lease command
//	        (see batch.go; new in this release, type 13)
//
//	version 2 (claim only):
//	claim:  count, queues..., worker, max, ttl, kindCount (>= 1), kinds...
//
//	version 3 (claim only, new in this release):
//	claim:  count, queues..., worker, max, ttl, kindCount (>= 0), kinds...,
//	        id (str, not empty)
//
//	version 4 (submit only, new in this release):
//	submit: the version 1 submit, then per job: parent count, parents
//	        (str), parent policy (byte); then batch (byte 0/1) [| batch id
//	        (str) | completion (byte 0/1) [| a version 1 submit's job]]
//
//	version 5 (submit only, new in this release):
//	submit: the version 4 submit, then per job its extensions: a uvarint
//	        bit set, 1: unique options (period varint ns, states byte)
//
//	version 1, new in this release (limit.go):
//	set limit: queue, kind, max      clear limit: queue, kind
//	set rate:  queue, every, burst   clear rate:  queue
//
// Kinds are written in the caller's order, duplicates included: the bytes
// are a function of the command value alone.

// minJobWire is the smallest encoding of one submitted job (empty strings,
// zero numbers): 4 strings + payload + 6 numbers + jitter byte + key.
const minJobWire = 12

// EncodeCommand validates c and returns the bytes of one raft entry. c may
// be a command value or a pointer to one. Validation is the same Apply does
// (minus state-dependent checks), so an error here means Apply would refuse;
// errors wrap the sentinels of errors.go.
func EncodeCommand(c Command) ([]byte, error) { return EncodeCommandWithRoom(c, 0) }

// EncodeCommandWithRoom is EncodeCommand with room bytes (zero) before the
// encoding, in the same allocation: with room for a header (raft's
// Headroom), the command is never copied again.
func EncodeCommandWithRoom(c Command, room int) ([]byte, error) {
	c, err := checked(c)
	if err != nil {
		return nil, err
	}
	return appendCommand(make([]byte, room, room+commandSizeHint(c)), c), nil
}

// Validate checks c as EncodeCommand does, without encoding it: it
// returns the error EncodeCommand would, or nil.
func Validate(c Command) error {
	_, err := checked(c)
	return err
}

// checked is c normalized (a pointer), once validated.
func checked(c Command) (Command, error) {
	c = normalize(c)
	if c == nil {
		return nil, fmt.Errorf("%w: nil command", ErrInvalidCommand)
	}
	if r := validate(c, true); r != nil {
		return nil, r
	}
	return c, nil
}

// commandSizeHint is the encoded size of a submit (exact) and a small
// guess for other commands: the buffer EncodeCommand encodes into, so a
// submit of many jobs is written without growing it.
func commandSizeHint(c Command) int {
	sc, ok := c.(*SubmitCmd)
	if !ok {
		return 64
	}
	n := 2 + uvarintLen(uint64(len(sc.Jobs)))
	ext := extended(sc)
	for i := range sc.Jobs {
		n += jobWireSize(&sc.Jobs[i])
		if ext && sc.Jobs[i].Unique == nil {
			n++ // its empty extension set
		}
	}
	return n
}

// normalize turns command values into pointers (nil for nil/unknown).
func normalize(c Command) Command {
	switch v := c.(type) {
	case SubmitCmd:
		return &v
	case ClaimCmd:
		return &v
	case ExtendCmd:
		return &v
	case AckCmd:
		return &v
	case NakCmd:
		return &v
	case TermCmd:
		return &v
	case CancelCmd:
		return &v
	case RetryCmd:
		return &v
	case ExpireCmd:
		return &v
	case PauseCmd:
		return &v
	case ResumeCmd:
		return &v
	case SweepCmd:
		return &v
	case BatchCmd:
		return &v
	case SetLimitCmd:
		return &v
	case ClearLimitCmd:
		return &v
	case SetRateCmd:
		return &v
	case ClearRateCmd:
		return &v
	}
	return normalizeSchedule(c)
}

// appendCommand encodes c (a pointer type) without validating it.
func appendCommand(b []byte, c Command) []byte {
	version := byte(FormatVersion)
	if cc, ok := c.(*ClaimCmd); ok && cc.ID != "" {
		version = FormatVersionClaimID
	} else if ok && len(cc.Kinds) > 0 {
		version = FormatVersionClaimKinds
	} else if sc, ok := c.(*SubmitCmd); ok && extended(sc) {
		version = FormatVersionSubmitExt
	} else if ok && sc.hasDeps() {
		version = FormatVersionDeps
	}
	b = append(b, version, byte(c.Type()))
	switch c := c.(type) {
	case *SubmitCmd:
		b = binary.AppendUvarint(b, uint64(len(c.Jobs)))
		for i := range c.Jobs {
			b = appendNewJob(b, &c.Jobs[i])
		}
		if version >= FormatVersionDeps {
			b = appendSubmitDeps(b, c)
		}
		if version == FormatVersionSubmitExt {
			for i := range c.Jobs {
				b = appendSubmitExt(b, &c.Jobs[i])
			}
		}
	case *ClaimCmd:
		b = binary.AppendUvarint(b, uint64(len(c.Queues)))
		for _, q := range c.Queues {
			b = appendStr(b, q)
		}
		b = appendStr(b, c.Worker)
		b = binary.AppendUvarint(b, uint64(c.Max))
		b = binary.AppendVarint(b, int64(c.TTL))
		if len(c.Kinds) > 0 || c.ID != "" {
			b = binary.AppendUvarint(b, uint64(len(c.Kinds)))
			for _, k := range c.Kinds {
				b = appendStr(b, k)
			}
		}
		if c.ID != "" {
			b = appendStr(b, c.ID)
		}
	case *ExtendCmd:
		b = appendStr(b, c.ID)
		b = binary.AppendUvarint(b, c.Token)
		b = binary.AppendVarint(b, int64(c.TTL))
	case *AckCmd:
		b = appendStr(b, c.ID)
		b = binary.AppendUvarint(b, c.Token)
		b = appendBytes(b, c.Result)
	case *NakCmd:
		b = appendStr(b, c.ID)
		b = binary.AppendUvarint(b, c.Token)
		b = binary.AppendVarint(b, int64(c.Delay))
		b = appendStr(b, c.Error)
	case *TermCmd:
		b = appendStr(b, c.ID)
		b = binary.AppendUvarint(b, c.Token)
		b = appendStr(b, c.Reason)
	case *CancelCmd:
		b = appendStr(b, c.ID)
		b = appendStr(b, c.Reason)
	case *RetryCmd:
		b = appendStr(b, c.ID)
	case *ExpireCmd:
		b = binary.AppendVarint(b, toNanos(c.LeaderSince))
		b = binary.AppendUvarint(b, c.Term)
	case *PauseCmd:
		b = appendStr(b, c.Queue)
	case *ResumeCmd:
		b = appendStr(b, c.Queue)
	case *SweepCmd:
		b = binary.AppendVarint(b, int64(c.MaxAge))
		b = binary.AppendUvarint(b, uint64(c.MaxPerQueue))
	case *BatchCmd:
		b = appendBatch(b, c)
	case *SetLimitCmd, *ClearLimitCmd, *SetRateCmd, *ClearRateCmd:
		b = appendLimitCmd(b, c)
	default:
		b = appendScheduleCmd(b, c)
	}
	return b
}

// DecodeCommand parses an encoded command into a pointer to its typed struct
// (*SubmitCmd, *ClaimCmd, ...). It checks structure only (version, type,
// lengths, no trailing bytes); field limits are checked by Apply. Errors wrap
// ErrUnsupportedVersion, ErrUnknownCommand, ErrTooLarge or ErrInvalidCommand.
// The returned command owns its memory (nothing aliases b): a submit's
// short strings are copied into shared chunks (decoder.keep).
func DecodeCommand(b []byte) (Command, error) { return decodeCommand(b, nil) }

// decodeCommand is DecodeCommand decoding a submit's jobs into scratch when
// it is large enough (Apply's reused slice: the jobs' strings and payloads
// are still their own, the NewJob structs not).
func decodeCommand(b []byte, scratch []NewJob) (Command, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d bytes, truncated header", ErrInvalidCommand, len(b))
	}
	switch {
	case b[0] == FormatVersion:
	case (b[0] == FormatVersionClaimKinds || b[0] == FormatVersionClaimID) && CommandType(b[1]) == CmdClaim:
	case (b[0] == FormatVersionDeps || b[0] == FormatVersionSubmitExt) && CommandType(b[1]) == CmdSubmit:
	default:
		return nil, fmt.Errorf("%w: command version %d (type %d)", ErrUnsupportedVersion, b[0], b[1])
	}
	d := decoder{b: b[2:]}
	var c Command
	switch CommandType(b[1]) {
	case CmdSubmit:
		n := d.count(MaxSubmit, minJobWire)
		d.pooled = true // batch-level allocation of the jobs' fields
		var jobs []NewJob
		if n > 0 && n <= cap(scratch) {
			jobs = scratch[:n]
		} else {
			jobs = make([]NewJob, n)
		}
		for i := range jobs {
			decodeNewJob(&d, &jobs[i])
			jobs[i].Unique = nil // scratch may hold an earlier submit's
		}
		sc := &SubmitCmd{Jobs: jobs}
		if b[0] >= FormatVersionDeps {
			decodeSubmitDeps(&d, sc)
		}
		if b[0] == FormatVersionSubmitExt {
			for i := range jobs {
				decodeSubmitExt(&d, &jobs[i])
			}
		}
		c = sc
	case CmdClaim:
		n := d.count(MaxClaimQueue, 1)
		qs := make([]string, n)
		for i := range qs {
			qs[i] = d.str()
		}
		cc := &ClaimCmd{Queues: qs, Worker: d.str(), Max: d.u32(), TTL: durationOf(d.varint())}
		if b[0] >= FormatVersionClaimKinds {
			n := d.count(MaxClaimKinds, 1)
			if n == 0 && d.err == nil && b[0] == FormatVersionClaimKinds {
				d.fail("version %d claim names no kind", FormatVersionClaimKinds)
			}
			if n > 0 {
				cc.Kinds = make([]string, n)
			}
			for i := range cc.Kinds {
				cc.Kinds[i] = d.str()
			}
		}
		if b[0] == FormatVersionClaimID {
			if cc.ID = d.str(); cc.ID == "" && d.err == nil {
				d.fail("version %d claim without an id", FormatVersionClaimID)
			}
		}
		c = cc
	case CmdExtend:
		c = &ExtendCmd{ID: d.str(), Token: d.uvarint(), TTL: durationOf(d.varint())}
	case CmdAck:
		c = &AckCmd{ID: d.str(), Token: d.uvarint(), Result: d.bytes()}
	case CmdNak:
		c = &NakCmd{ID: d.str(), Token: d.uvarint(), Delay: durationOf(d.varint()), Error: d.str()}
	case CmdTerm:
		c = &TermCmd{ID: d.str(), Token: d.uvarint(), Reason: d.str()}
	case CmdCancel:
		c = &CancelCmd{ID: d.str(), Reason: d.str()}
	case CmdRetry:
		c = &RetryCmd{ID: d.str()}
	case CmdExpire:
		c = &ExpireCmd{LeaderSince: fromNanos(d.varint()), Term: d.uvarint()}
	case CmdPause:
		c = &PauseCmd{Queue: d.str()}
	case CmdResume:
		c = &ResumeCmd{Queue: d.str()}
	case CmdSweep:
		c = &SweepCmd{MaxAge: durationOf(d.varint()), MaxPerQueue: d.u32()}
	case CmdBatch:
		c = decodeBatch(&d)
	case CmdSchedule, CmdScheduleSet, CmdFire:
		c = decodeScheduleCmd(&d, CommandType(b[1]))
	case CmdSetLimit, CmdClearLimit, CmdSetRate, CmdClearRate:
		c = decodeLimitCmd(CommandType(b[1]), &d)
	default:
		return nil, fmt.Errorf("%w: type %d", ErrUnknownCommand, b[1])
	}
	d.end()
	if d.err != nil {
		return nil, d.err
	}
	return c, nil
}

func durationOf(ns int64) time.Duration { return time.Duration(ns) }

// SubmitJobSize checks nj as EncodeCommand checks each job of a submit
// and returns the bytes a SubmitCmd holding nj alone encodes to, without
// encoding it. Errors wrap the sentinels of errors.go.
func SubmitJobSize(nj *NewJob) (int, error) {
	if r := nj.validate(); r != nil {
		return 0, r
	}
	return 3 + jobWireSize(nj), nil
}

// jobWireSize is the encoded size of one job of a submit (appendCommand).
func jobWireSize(nj *NewJob) int {
	str := func(n int) int { return uvarintLen(uint64(n)) + n }
	return str(len(nj.ID)) + str(len(nj.Queue)) + str(len(nj.Kind)) + str(len(nj.Payload)) +
		varintLen(int64(nj.Priority)) + varintLen(toNanos(nj.RunAt)) + uvarintLen(uint64(nj.MaxAttempts)) +
		varintLen(int64(nj.Backoff.Base)) + varintLen(int64(nj.Backoff.Max)) + uvarintLen(uint64(nj.Backoff.Factor)) + 1 +
		str(len(nj.IdempotencyKey)) + depsWireSize(nj) + uniqueWireSize(nj)
}

// uniqueWireSize is what a job's unique options add: its extensions and,
// for a job without parents, the version 4 part it then takes (its empty
// parents and policy) with the submit's batch byte (0 without unique
// options: such a submit takes version 1 or 4).
func uniqueWireSize(nj *NewJob) int {
	if nj.Unique == nil {
		return 0
	}
	if depsWireSize(nj) == 0 {
		return submitExtSize(nj) + 3
	}
	return submitExtSize(nj)
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func varintLen(v int64) int {
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	return uvarintLen(u)
}
