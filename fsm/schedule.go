package fsm

import (
	"strings"
	"time"
	_ "time/tzdata" // LoadZone's zone database where the host has none

	"github.com/robfig/cron/v3"
)

// Schedule limits.
const (
	// MaxScheduleIDLen bounds a schedule ID: its jobs' IDs (scheduleJobID)
	// are the ID plus a tick and must fit MaxIDLen.
	MaxScheduleIDLen = 128
	// MaxCronLen bounds a cron expression.
	MaxCronLen = 256
	// MinInterval is the shortest interval (and the cron parser's
	// resolution is one second too).
	MinInterval = time.Second
	// MaxInterval is the longest interval.
	MaxInterval = 366 * 24 * time.Hour
	// MaxZoneShifts bounds a zone's offset changes (ZoneShifts).
	MaxZoneShifts = 1024
	// maxOffset bounds a zone's UTC offset, in seconds (±18 h).
	maxOffset = 18 * 3600
)

// Overlap says whether a tick fires while earlier jobs of its schedule
// have not finished.
type Overlap uint8

// Overlap policies. Values are part of the encodings.
const (
	// OverlapAllow: every tick fires.
	OverlapAllow Overlap = iota
	// OverlapSkip: a tick is skipped while a job of the schedule is
	// pending, scheduled or running.
	OverlapSkip
	// OverlapOne: a tick is skipped while a job of the schedule is pending
	// or scheduled (waits in its queue): at most one queued, running ones
	// do not count.
	OverlapOne
	numOverlaps
)

var overlapNames = [numOverlaps]string{"allow", "skip", "one"}

func (o Overlap) String() string {
	if o < numOverlaps {
		return overlapNames[o]
	}
	return "overlap(?)"
}

// ParseOverlap reads an overlap policy by name ("" is allow).
func ParseOverlap(s string) (Overlap, bool) {
	if s == "" {
		return OverlapAllow, true
	}
	for i, n := range overlapNames {
		if n == s {
			return Overlap(i), true
		}
	}
	return 0, false
}

// CatchUp says what happens to ticks missed while no fire command applied:
// ticks that were due and whose successor was due too by the time the
// schedule fired (the cluster had no quorum or no leader for a whole
// period).
type CatchUp uint8

// Catch-up policies. Values are part of the encodings.
const (
	// CatchUpOne: a run of missed ticks fires once, as the job of its
	// first tick (the others are counted Missed), then the current tick
	// fires as usual.
	CatchUpOne CatchUp = iota
	// CatchUpSkip: missed ticks fire nothing (counted Missed); only the
	// current tick fires.
	CatchUpSkip
	numCatchUps
)

var catchUpNames = [numCatchUps]string{"one", "skip"}

func (c CatchUp) String() string {
	if c < numCatchUps {
		return catchUpNames[c]
	}
	return "catchup(?)"
}

// ParseCatchUp reads a catch-up policy by name ("" is one).
func ParseCatchUp(s string) (CatchUp, bool) {
	if s == "" {
		return CatchUpOne, true
	}
	for i, n := range catchUpNames {
		if n == s {
			return CatchUp(i), true
		}
	}
	return 0, false
}

// Template is the job a schedule creates at each tick it fires: a NewJob
// without ID (derived from the schedule and the tick), run-at (the tick's
// firing) or idempotency key.
type Template struct {
	Queue, Kind string
	Payload     []byte
	Priority    int32
	MaxAttempts uint32 // 0: DefaultMaxAttempts
	Backoff     Backoff
}

// ScheduleDef is what a create names: the schedule's definition.
type ScheduleDef struct {
	// ID names the schedule: 1..MaxScheduleIDLen bytes of A-Z a-z 0-9 . _ -
	ID string
	// Cron is a cron expression (robfig/cron/v3's syntax: 5 fields, or 6
	// with seconds first, or a descriptor such as @hourly; no TZ= prefix
	// and no @every: use Zone and Every). Exactly one of Cron and Every.
	Cron string
	// Every is an interval (MinInterval..MaxInterval): ticks at the
	// create's log time plus every multiple of it.
	Every time.Duration
	// Zone is the time zone a cron expression reads its wall clock in,
	// with its rules (LoadZone); the zero Zone is UTC. Ignored by
	// intervals but kept.
	Zone    Zone
	Job     Template
	Overlap Overlap
	CatchUp CatchUp
}

// Schedule is a schedule as the state machine holds it.
type Schedule struct {
	ScheduleDef
	Paused bool
	// Created is the log time of the create: an interval's anchor.
	Created time.Time
	// Next is the next tick (a log time); zero when the expression has no
	// tick left.
	Next time.Time
	// LastTick is the last tick fired or passed (zero: none yet).
	LastTick time.Time
	// Fired counts the jobs created, Skipped the ticks its overlap policy
	// skipped, Missed the ticks its catch-up policy did not fire (see
	// CatchUp).
	Fired, Skipped, Missed uint64
	// Open lists the jobs created that count against the overlap policy
	// (not yet seen finished; pruned when the schedule next fires). Empty
	// under OverlapAllow.
	Open []string
}

// Zone is a time zone's rules as a schedule keeps them: the UTC offset in
// force before the first shift, then every change of offset. Members never
// read zone rules from their host: a create carries the rules the proposer
// resolved (LoadZone), so every member computes the same ticks whatever
// its own zone database says, and a schedule keeps the rules of its
// create.
type Zone struct {
	Name   string // the IANA name ("" or "UTC": UTC)
	Offset int32  // seconds east of UTC before the first shift
	Shifts []ZoneShift
}

// ZoneShift is a change of a zone's UTC offset.
type ZoneShift struct {
	At     int64 // unix seconds
	Offset int32 // seconds east of UTC from At on
}

// Zone rules are resolved from 2000 to 2100: ticks beyond keep the last
// offset.
var (
	zoneFrom = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	zoneTo   = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
)

// LoadZone resolves an IANA zone name into the rules a schedule keeps: from
// the host's zone database, else from the one embedded in every jobraft
// binary (time/tzdata). "" and "UTC" are UTC; "Local" is refused (it
// names the host's zone). Errors wrap ErrUnknownZone.
func LoadZone(name string) (Zone, error) {
	if name == "" || name == "UTC" {
		return Zone{Name: name}, nil
	}
	if name == "Local" || len(name) > MaxNameLen {
		return Zone{}, refuse(CodeUnknownZone, "zone %q", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return Zone{}, refuse(CodeUnknownZone, "zone %q", name)
	}
	t := zoneFrom.In(loc)
	_, off := t.Zone()
	z := Zone{Name: name, Offset: int32(off)}
	last := off
	for range 100 * MaxZoneShifts {
		_, end := t.ZoneBounds()
		if end.IsZero() || !end.Before(zoneTo) || len(z.Shifts) == MaxZoneShifts {
			break
		}
		if !end.After(t) {
			// time's bounds of a zone's extended rule can end where
			// they start (at a year's turn in UTC): step past it.
			end = t.Add(time.Second)
		}
		t = end
		if _, off := t.Zone(); off != last {
			z.Shifts = append(z.Shifts, ZoneShift{At: t.Unix(), Offset: int32(off)})
			last = off
		}
	}
	return z, nil
}

func (z *Zone) validate() *refusal {
	if len(z.Name) > MaxNameLen {
		return refuse(CodeTooLarge, "zone name of %d bytes (max %d)", len(z.Name), MaxNameLen)
	}
	if len(z.Shifts) > MaxZoneShifts {
		return refuse(CodeTooLarge, "zone of %d shifts (max %d)", len(z.Shifts), MaxZoneShifts)
	}
	if z.Offset < -maxOffset || z.Offset > maxOffset {
		return refuse(CodeInvalidCommand, "zone offset %ds out of range", z.Offset)
	}
	for i, sh := range z.Shifts {
		if sh.Offset < -maxOffset || sh.Offset > maxOffset || (i > 0 && sh.At <= z.Shifts[i-1].At) {
			return refuse(CodeInvalidCommand, "zone shift %d out of order or range", i)
		}
	}
	return nil
}

// span returns the offset in force at unix second sec and the unix second
// its span ends (0: never).
func (z *Zone) span(sec int64) (offset int32, end int64) {
	offset = z.Offset
	for _, sh := range z.Shifts { // few shifts; a tick's span is found once per tick
		if sh.At > sec {
			return offset, sh.At
		}
		offset = sh.Offset
	}
	return offset, 0
}

// cronParser reads 5 or 6 fields (seconds optional) and descriptors.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseCron parses a cron expression as a schedule keeps it (no zone
// prefix, no @every).
func parseCron(spec string) (*cron.SpecSchedule, *refusal) {
	if len(spec) > MaxCronLen {
		return nil, refuse(CodeTooLarge, "cron expression of %d bytes (max %d)", len(spec), MaxCronLen)
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, refuse(CodeBadCron, "cron expression with a zone prefix: give the zone as the schedule's zone")
	}
	if strings.HasPrefix(spec, "@every") {
		return nil, refuse(CodeBadCron, "cron @every: give the interval as the schedule's interval")
	}
	s, err := cronParser.Parse(spec)
	if err != nil {
		return nil, refuse(CodeBadCron, "cron expression %q: %v", spec, err)
	}
	ss, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, refuse(CodeBadCron, "cron expression %q", spec)
	}
	return ss, nil
}

// template is the job t describes (ID and run-at filled at firing).
func (t *Template) newJob() NewJob {
	return NewJob{Queue: t.Queue, Kind: t.Kind, Payload: t.Payload, Priority: t.Priority, MaxAttempts: t.MaxAttempts, Backoff: t.Backoff}
}

// validate checks a definition (stateless: Apply and EncodeCommand). A
// cron expression is parsed and must have a tick within five years of
// any time (the parser's horizon).
func (d *ScheduleDef) validate() *refusal {
	if r := checkScheduleID(d.ID); r != nil {
		return r
	}
	switch {
	case d.Cron != "" && d.Every != 0:
		return refuse(CodeInvalidCommand, "schedule %q has both a cron expression and an interval", d.ID)
	case d.Cron == "" && d.Every == 0:
		return refuse(CodeBadInterval, "schedule %q has neither a cron expression nor an interval", d.ID)
	case d.Cron == "" && (d.Every < MinInterval || d.Every > MaxInterval):
		return refuse(CodeBadInterval, "interval %v out of [%v, %v]", d.Every, MinInterval, MaxInterval)
	case d.Cron != "":
		if _, r := parseCron(d.Cron); r != nil {
			return r
		}
	}
	if r := d.Zone.validate(); r != nil {
		return r
	}
	if d.Overlap >= numOverlaps || d.CatchUp >= numCatchUps {
		return refuse(CodeInvalidCommand, "overlap %d or catch-up %d unknown", d.Overlap, d.CatchUp)
	}
	nj := d.Job.newJob()
	if r := nj.validate(); r != nil {
		r.detail = "schedule job: " + r.detail
		return r
	}
	return nil
}

// sameDef reports whether two definitions are the same create: every field
// but the zone's rules (a create resolved on another host, or after a
// zone database update, repeats the first).
func sameDef(a, b *ScheduleDef) bool {
	return a.ID == b.ID && a.Cron == b.Cron && a.Every == b.Every && a.Zone.Name == b.Zone.Name &&
		a.Job.Queue == b.Job.Queue && a.Job.Kind == b.Job.Kind && string(a.Job.Payload) == string(b.Job.Payload) &&
		a.Job.Priority == b.Job.Priority && a.Job.MaxAttempts == b.Job.MaxAttempts && a.Job.Backoff == b.Job.Backoff &&
		a.Overlap == b.Overlap && a.CatchUp == b.CatchUp
}

// ScheduleJobID is the ID of the job schedule id fires for tick: '@', the
// schedule ID, ':', the tick in UTC (RFC 3339, nanoseconds when not
// whole seconds). A function of the schedule and the tick alone, so a
// tick can create at most one job; outside the callers' ID space ('@').
func ScheduleJobID(id string, tick time.Time) string {
	return "@" + id + ":" + tick.UTC().Format(time.RFC3339Nano)
}

// checkScheduleID checks a schedule ID: 1..MaxScheduleIDLen bytes of
// A-Z a-z 0-9 . _ - (no ':', which ends it in its jobs' IDs).
func checkScheduleID(id string) *refusal {
	if id == "" || len(id) > MaxScheduleIDLen {
		return refuse(CodeInvalidCommand, "schedule id of %d bytes (1..%d)", len(id), MaxScheduleIDLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return refuse(CodeInvalidCommand, "schedule id: byte %d is outside A-Z a-z 0-9 . _ -", i)
		}
	}
	return nil
}

// tickAfter returns the schedule's first tick strictly after after (unix
// ns), 0 when there is none. An interval's ticks are anchor + k·every
// (k >= 1). A cron expression's are read on the zone's wall clock, span by
// span of constant offset, and a wall-clock time never fires twice: in the
// hour a shift back repeats, ticks whose wall time already passed are
// skipped; a wall time a shift forward skips does not exist and does not
// fire (the parser's rule).
func (d *ScheduleDef) tickAfter(anchor, after int64) int64 {
	if d.Cron == "" {
		every := int64(d.Every)
		if after < anchor {
			return addSat(anchor, every)
		}
		k := (after-anchor)/every + 1
		if k > (1<<63-1-anchor)/every {
			return 0
		}
		return anchor + k*every
	}
	spec, r := parseCron(d.Cron)
	if r != nil {
		return 0
	}
	t := after
	off, end := d.Zone.span(floorSec(t))
	floor := floorSec(after) + int64(off) // the wall clock of after: ticks must pass it
	for range 100000 {
		n := spec.Next(time.Unix(0, t).In(time.FixedZone(d.Zone.Name, int(off))))
		if n.IsZero() {
			return 0
		}
		ns := n.UnixNano()
		if end != 0 && n.Unix() >= end {
			// Crossed into the next span: read on from its start in its
			// offset (Next starts at the whole second after t).
			t = end*int64(time.Second) - 1
			off, end = d.Zone.span(end)
			continue
		}
		if n.Unix()+int64(off) <= floor {
			t = ns // a wall time already passed: a shift back repeats it
			continue
		}
		return ns
	}
	return 0
}

// floorSec is ns in whole unix seconds, rounded down.
func floorSec(ns int64) int64 {
	s := ns / int64(time.Second)
	if ns%int64(time.Second) < 0 {
		s--
	}
	return s
}

// NextTick returns the definition's first tick strictly after after, for a
// schedule created at created (an interval's anchor); zero when there is
// none (or the timing is invalid). It is the state machine's own tick
// arithmetic (for checkers and displays); the job template is not read.
func (d *ScheduleDef) NextTick(created, after time.Time) time.Time {
	if (d.Cron == "" && (d.Every < MinInterval || d.Every > MaxInterval)) || d.Zone.validate() != nil {
		return time.Time{}
	}
	return fromNanos(d.tickAfter(toNanos(created), toNanos(after)))
}
