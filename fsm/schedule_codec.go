package fsm

import (
	"encoding/binary"
	"time"
)

// ScheduleCmd creates a schedule (ScheduleDef). A create whose ID exists
// with the same definition (sameDef: the zone's rules aside) is a repeat:
// it answers the schedule as it is, Changed false; with another definition
// it is refused ErrScheduleExists. Its first tick is the first after the
// create's log time.
type ScheduleCmd struct{ Def ScheduleDef }

// ScheduleOp is what a ScheduleSetCmd does.
type ScheduleOp uint8

// Schedule operations. Values are part of the encodings.
const (
	opInvalid      ScheduleOp = iota
	SchedulePause             // stop firing; ticks while paused never fire
	ScheduleResume            // fire again from the first tick after the resume
	ScheduleDelete            // remove the schedule (its jobs stay)
	numScheduleOps
)

// ScheduleSetCmd pauses, resumes or deletes the schedule ID. Answers the
// schedule after it (a delete: as it was); Changed false when pausing a
// paused or resuming a running one. An unknown ID is ErrScheduleNotFound.
type ScheduleSetCmd struct {
	ID string
	Op ScheduleOp
}

// FireCmd fires every schedule due at the entry's log time: each tick at or
// before it that has not fired, in schedule ID order, by the schedules'
// catch-up and overlap policies (schedule_apply.go). Proposed by the leader
// when its state shows a due schedule (ScheduleDue); a repeated or
// concurrent one fires nothing twice, since what it fires is a function of
// the state and the entry's log time alone. The result lists the jobs
// created (Result.Fired).
type FireCmd struct{}

// Type implementations.
func (ScheduleCmd) Type() CommandType    { return CmdSchedule }
func (ScheduleSetCmd) Type() CommandType { return CmdScheduleSet }
func (FireCmd) Type() CommandType        { return CmdFire }

// validateSchedule is validate for the schedule commands.
func validateSchedule(c Command) *refusal {
	switch c := c.(type) {
	case *ScheduleCmd:
		return c.Def.validate()
	case *ScheduleSetCmd:
		if r := checkScheduleID(c.ID); r != nil {
			return r
		}
		if c.Op == opInvalid || c.Op >= numScheduleOps {
			return refuse(CodeInvalidCommand, "schedule operation %d", c.Op)
		}
	}
	return nil
}

// normalizeSchedule is normalize for the schedule commands.
func normalizeSchedule(c Command) Command {
	switch v := c.(type) {
	case ScheduleCmd:
		return &v
	case ScheduleSetCmd:
		return &v
	case FireCmd:
		return &v
	}
	return c
}

// Schedule command encodings (after version 1 and the type byte):
//
//	schedule:     definition (appendDef)
//	schedule-set: id (str), op (byte)
//	fire:         nothing
func appendScheduleCmd(b []byte, c Command) []byte {
	switch c := c.(type) {
	case *ScheduleCmd:
		b = appendDef(b, &c.Def)
	case *ScheduleSetCmd:
		b = appendStr(b, c.ID)
		b = append(b, byte(c.Op))
	}
	return b
}

func decodeScheduleCmd(d *decoder, t CommandType) Command {
	switch t {
	case CmdSchedule:
		c := &ScheduleCmd{}
		decodeDef(d, &c.Def)
		return c
	case CmdScheduleSet:
		return &ScheduleSetCmd{ID: d.str(), Op: ScheduleOp(d.byte())}
	}
	return &FireCmd{}
}

// appendDef encodes a definition: id, cron (str), every (varint ns), zone
// name (str), zone offset (varint), shift count, shifts (at varint, offset
// varint), queue, kind (str), payload (bytes), priority (varint), max
// attempts (uvarint), backoff base, max (varint), factor (uvarint), jitter
// (byte), overlap, catch-up (byte).
func appendDef(b []byte, d *ScheduleDef) []byte {
	b = appendStr(b, d.ID)
	b = appendStr(b, d.Cron)
	b = binary.AppendVarint(b, int64(d.Every))
	b = appendStr(b, d.Zone.Name)
	b = binary.AppendVarint(b, int64(d.Zone.Offset))
	b = binary.AppendUvarint(b, uint64(len(d.Zone.Shifts)))
	for _, sh := range d.Zone.Shifts {
		b = binary.AppendVarint(b, sh.At)
		b = binary.AppendVarint(b, int64(sh.Offset))
	}
	t := &d.Job
	b = appendStr(b, t.Queue)
	b = appendStr(b, t.Kind)
	b = appendBytes(b, t.Payload)
	b = binary.AppendVarint(b, int64(t.Priority))
	b = binary.AppendUvarint(b, uint64(t.MaxAttempts))
	b = binary.AppendVarint(b, int64(t.Backoff.Base))
	b = binary.AppendVarint(b, int64(t.Backoff.Max))
	b = binary.AppendUvarint(b, uint64(t.Backoff.Factor))
	b = append(b, t.Backoff.Jitter, byte(d.Overlap), byte(d.CatchUp))
	return b
}

func decodeDef(d *decoder, def *ScheduleDef) {
	def.ID = d.str()
	def.Cron = d.str()
	def.Every = time.Duration(d.varint())
	def.Zone.Name = d.str()
	def.Zone.Offset = d.i32()
	if n := d.count(MaxZoneShifts, 2); n > 0 {
		def.Zone.Shifts = make([]ZoneShift, n)
		for i := range def.Zone.Shifts {
			def.Zone.Shifts[i] = ZoneShift{At: d.varint(), Offset: d.i32()}
		}
	}
	t := &def.Job
	t.Queue = d.str()
	t.Kind = d.str()
	t.Payload = d.bytes()
	t.Priority = d.i32()
	t.MaxAttempts = d.u32()
	t.Backoff.Base = time.Duration(d.varint())
	t.Backoff.Max = time.Duration(d.varint())
	t.Backoff.Factor = d.u32()
	t.Backoff.Jitter = d.byte()
	def.Overlap = Overlap(d.byte())
	def.CatchUp = CatchUp(d.byte())
}

// Schedule record (snapshots, digests, results): the definition, then
// paused (byte 0/1), created, next, last tick (varint ns), fired, skipped,
// missed (uvarint), open count and open job IDs (str).
func appendSchedule(b []byte, s *Schedule) []byte {
	b = appendDef(b, &s.ScheduleDef)
	b = appendBool(b, s.Paused)
	b = binary.AppendVarint(b, toNanos(s.Created))
	b = binary.AppendVarint(b, toNanos(s.Next))
	b = binary.AppendVarint(b, toNanos(s.LastTick))
	b = binary.AppendUvarint(b, s.Fired)
	b = binary.AppendUvarint(b, s.Skipped)
	b = binary.AppendUvarint(b, s.Missed)
	b = binary.AppendUvarint(b, uint64(len(s.Open)))
	for _, id := range s.Open {
		b = appendStr(b, id)
	}
	return b
}

func decodeSchedule(d *decoder) *Schedule {
	s := &Schedule{}
	decodeDef(d, &s.ScheduleDef)
	s.Paused = d.bool()
	s.Created = fromNanos(d.varint())
	s.Next = fromNanos(d.varint())
	s.LastTick = fromNanos(d.varint())
	s.Fired = d.uvarint()
	s.Skipped = d.uvarint()
	s.Missed = d.uvarint()
	if n := d.count(len(d.b), 1); n > 0 {
		s.Open = make([]string, n)
		for i := range s.Open {
			s.Open[i] = d.str()
		}
	}
	return s
}

// checkSchedule is a restored record's invariants ("" when they hold).
func checkSchedule(s *Schedule) string {
	if r := s.validate(); r != nil {
		return r.detail
	}
	if s.Created.IsZero() || (!s.Next.IsZero() && !s.Next.After(s.Created)) {
		return "next tick not after its create"
	}
	if s.Overlap == OverlapAllow && len(s.Open) > 0 {
		return "open jobs under overlap allow"
	}
	for _, id := range s.Open {
		if len(id) == 0 || len(id) > MaxIDLen {
			return "bad open job id"
		}
	}
	return ""
}

// Schedule results (after the common head, when OK):
//
//	schedule, schedule-set: changed (byte), schedule record
//	fire: changed (byte), count, job IDs created (str)
func appendScheduleResult(b []byte, r *result) []byte {
	b = appendBool(b, r.changed)
	if r.cmd == CmdFire {
		b = binary.AppendUvarint(b, uint64(len(r.fired)))
		for _, id := range r.fired {
			b = appendStr(b, id)
		}
		return b
	}
	return appendSchedule(b, r.sched)
}

func scheduleResultSize(r *result) int {
	return len(appendScheduleResult(nil, r))
}

func decodeScheduleResult(d *decoder, r *Result) {
	r.Changed = d.bool()
	if r.Command == CmdFire {
		n := d.count(len(d.b), 1)
		r.Fired = make([]string, n)
		for i := range r.Fired {
			r.Fired[i] = d.str()
		}
		return
	}
	r.Schedule = decodeSchedule(d)
}
