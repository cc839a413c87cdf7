package wal

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal/segment"
)

// "Not found" is raft.ErrLogNotFound itself: hashicorp/raft compares it by
// identity in places.
func TestNotFoundIsRaftSentinel(t *testing.T) {
	eachStore(t, func(t *testing.T, s storeUnderTest) {
		var e raft.Log
		if err := s.GetLog(1, &e); err != raft.ErrLogNotFound {
			t.Fatalf("empty log: got %v, want raft.ErrLogNotFound itself", err)
		}
		mustStore(t, s, stamped(1, 1, "x"))
		if err := s.GetLog(2, &e); err != raft.ErrLogNotFound {
			t.Fatalf("past the end: got %v", err)
		}
	})
}

// Stored bytes that rot under a store the guard wraps are refused on read.
func TestGuardGetLogRefusesRot(t *testing.T) {
	inner := raft.NewInmemStore()
	g := NewGuard(inner)
	mustStore(t, g, stamped(1, 1, "payload-one"), stamped(2, 1, "payload-two"))
	var e raft.Log
	if err := inner.GetLog(2, &e); err != nil {
		t.Fatal(err)
	}
	e.Data[0] ^= 0x01 // InmemStore shares the slice: this is the stored copy rotting
	var out raft.Log
	err := g.GetLog(2, &out)
	if !errors.Is(err, ErrPayloadMismatch) || !errors.Is(err, ErrCorrupt) || !IsCorrupt(err) {
		t.Fatalf("got %v", err)
	}
	if out.Data != nil {
		t.Fatal("damaged entry returned")
	}
	// The empty-body shape: present, right term, no body.
	if err := inner.GetLog(1, &e); err != nil {
		t.Fatal(err)
	}
	stored := e
	stored.Data = nil
	inner.StoreLog(&stored)
	ge := guardErr(t, g.GetLog(1, &out), ErrPayloadMismatch)
	if ge.StoredLen != 0 || ge.ExpectedLen != uint32(len("payload-one")) {
		t.Fatalf("diagnostic %+v", ge)
	}
}

// Entries that arrive unstamped (raft's no-op, configuration, barrier) are
// stored with a persist stamp so rot is caught on read; the caller's entry
// is not modified and GetLog returns it without the store's stamp.
// RequireStamp refuses an unstamped command.
func TestUnstampedEntriesGetPersistStamp(t *testing.T) {
	eachStore(t, func(t *testing.T, s storeUnderTest) {
		cfg := &raft.Log{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte("cfg")}
		noop := &raft.Log{Index: 2, Term: 1, Type: raft.LogNoop}
		mustStore(t, s, cfg, noop)
		if cfg.Extensions != nil || noop.Extensions != nil {
			t.Fatal("caller's entries modified")
		}
		var e, stored raft.Log
		if err := s.GetLog(1, &e); err != nil {
			t.Fatal(err)
		}
		if e.Extensions != nil || string(e.Data) != "cfg" {
			t.Fatalf("GetLog returned extensions %q data %q, StoreLog was given none and %q", e.Extensions, e.Data, "cfg")
		}
		switch st := s.LogStore.(type) {
		case *Log:
			if _, err := st.w.ReadEntry(1, &stored); err != nil {
				t.Fatal(err)
			}
		case *Guard:
			if err := st.Inner().GetLog(1, &stored); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("store %T", s.LogStore)
		}
		st, ok := segment.ParseStamp(stored.Extensions)
		if !ok || st.Origin != segment.StampPersist || st.Len != 3 || st.CRC != segment.Checksum([]byte("cfg")) {
			t.Fatalf("stored stamp %+v %v", st, ok)
		}
	})
	g := NewGuard(raft.NewInmemStore(), GuardRequireStamp())
	guardErr(t, g.StoreLogs([]*raft.Log{entry(1, 1, "cmd")}), ErrUnstamped)
}

// stampSize is the length of the stamp trailer in the segment format
// (wal/segment's stampSize), the extension bytes segment.Stamp adds.
const stampSize = 13

// segment.Stamp keeps other middleware's extension bytes and segment.VerifyStamp checks it.
func TestStampRoundTrip(t *testing.T) {
	e := &raft.Log{Index: 1, Term: 1, Data: []byte("abc"), Extensions: []byte("other")}
	segment.Stamp(e)
	if string(e.Extensions[:5]) != "other" {
		t.Fatal("foreign extension bytes lost")
	}
	if err := segment.VerifyStamp(e); err != nil {
		t.Fatal(err)
	}
	segment.Stamp(e) // restamping replaces, not stacks
	if len(e.Extensions) != 5+stampSize {
		t.Fatalf("extensions %d bytes", len(e.Extensions))
	}
	e.Data = []byte("abd")
	guardErr(t, segment.VerifyStamp(e), ErrPayloadMismatch)
	e.Extensions = nil
	guardErr(t, segment.VerifyStamp(e), ErrUnstamped)
}
