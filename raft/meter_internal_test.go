package raft

import (
	"bytes"
	"io"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/jobraft/jobraft/catchup"
)

// sinkTransport takes every append and snapshot (the snapshot read to its
// end, as raft's transports do).
type sinkTransport struct{ hraft.Transport }

func (sinkTransport) AppendEntries(hraft.ServerID, hraft.ServerAddress, *hraft.AppendEntriesRequest, *hraft.AppendEntriesResponse) error {
	return nil
}

func (sinkTransport) InstallSnapshot(_ hraft.ServerID, _ hraft.ServerAddress, _ *hraft.InstallSnapshotRequest, resp *hraft.InstallSnapshotResponse, data io.Reader) error {
	_, err := io.Copy(io.Discard, data)
	resp.Success = err == nil
	return err
}

// The meter throttles snapshot chunks to any member and appends with
// entries to a member marked catching up, all in one bucket; heartbeats
// and appends to others pass at once. The send path's waits are recorded,
// not slept.
func TestMeterThrottlesCatchUpOnly(t *testing.T) {
	tr, m := newMeter(sinkTransport{})
	var waited time.Duration
	clock := time.Unix(1000, 0)
	m.now = func() time.Time { return clock }
	m.sleep = func(d time.Duration) { waited += d; clock = clock.Add(d) }
	const rate = 1 << 20
	m.throttle.Store(catchup.NewThrottle(rate))
	entries := func(n, size int) *hraft.AppendEntriesRequest {
		a := &hraft.AppendEntriesRequest{}
		for i := 0; i < n; i++ {
			a.Entries = append(a.Entries, &hraft.Log{Data: make([]byte, size)})
		}
		return a
	}
	var resp hraft.AppendEntriesResponse

	// A voter (not marked): 4 MiB of appends, and heartbeats, never wait.
	for i := 0; i < 4; i++ {
		if err := tr.AppendEntries("v", "a", entries(16, 64<<10), &resp); err != nil {
			t.Fatal(err)
		}
		if err := tr.AppendEntries("v", "a", &hraft.AppendEntriesRequest{}, &resp); err != nil {
			t.Fatal(err)
		}
	}
	if waited != 0 {
		t.Fatalf("appends to a member not catching up waited %v", waited)
	}

	// A snapshot of 3 MiB to a member: past the burst (128 KiB) it is sent
	// at the rate.
	var sresp hraft.InstallSnapshotResponse
	snap := bytes.NewReader(make([]byte, 3<<20))
	if err := tr.InstallSnapshot("n", "b", &hraft.InstallSnapshotRequest{Size: 3 << 20}, &sresp, snap); err != nil {
		t.Fatal(err)
	}
	if got := m.peer("n").installBytes.Load(); got != 3<<20 {
		t.Fatalf("counted %d snapshot bytes, want %d", got, 3<<20)
	}
	if lo, hi := 2800*time.Millisecond, 3*time.Second; waited < lo || waited > hi {
		t.Fatalf("a 3 MiB snapshot at 1 MiB/s waited %v, want within [%v, %v]", waited, lo, hi)
	}

	// Appends to a member marked catching up wait too; its heartbeats do not.
	m.peer("n").catching.Store(true)
	w0 := waited
	if err := tr.AppendEntries("n", "b", &hraft.AppendEntriesRequest{}, &resp); err != nil {
		t.Fatal(err)
	}
	if waited != w0 {
		t.Fatalf("a heartbeat to a catching-up member waited %v", waited-w0)
	}
	clock = clock.Add(time.Hour) // the bucket refills to its burst (128 KiB)
	if err := tr.AppendEntries("n", "b", entries(10, 64<<10), &resp); err != nil {
		t.Fatal(err)
	}
	if d := waited - w0; d < 400*time.Millisecond || d > 600*time.Millisecond {
		t.Fatalf("640 KiB of appends to a catching-up member waited %v, want about 500ms", d)
	}

	// Unlimited: nothing waits.
	m.throttle.Store(nil)
	w0 = waited
	if err := tr.AppendEntries("n", "b", entries(64, 64<<10), &resp); err != nil {
		t.Fatal(err)
	}
	if waited != w0 {
		t.Fatalf("unlimited throttle waited %v", waited-w0)
	}
}
