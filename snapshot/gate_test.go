package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// The regression test for the consistency gate (docs/failures.md §7): the
// artifact is altered between manifest sealing and the gate's re-read; the
// candidate must be rejected, nothing published in its place, the previous
// snapshot kept, and the diagnostic must name the mismatch.
func TestGateRejectsArtifactAlteredAfterSealing(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		alter                   func(t testing.TB, c candidate)
		sizeEqual, digestEqual  bool
		manifestIntact, wantErr bool
		artifactSize            int64 // expected bytes read back
	}{
		{name: "append a byte", alter: func(t testing.TB, c candidate) { appendByte(t, c.Artifact) },
			sizeEqual: false, digestEqual: false, manifestIntact: true, artifactSize: 8001},
		{name: "flip a byte", alter: func(t testing.TB, c candidate) { flipByte(t, c.Artifact, 1234) },
			sizeEqual: true, digestEqual: false, manifestIntact: true, artifactSize: 8000},
		{name: "truncate", alter: func(t testing.TB, c candidate) {
			if err := os.Truncate(c.Artifact, 100); err != nil {
				t.Fatal(err)
			}
		}, sizeEqual: false, digestEqual: false, manifestIntact: true, artifactSize: 100},
		{name: "remove artifact", alter: func(t testing.TB, c candidate) {
			if err := os.Remove(c.Artifact); err != nil {
				t.Fatal(err)
			}
		}, sizeEqual: false, digestEqual: false, manifestIntact: true, wantErr: true, artifactSize: -1},
		{name: "alter manifest", alter: func(t testing.TB, c candidate) { flipByte(t, c.Manifest, headerLen+3) },
			sizeEqual: true, digestEqual: true, manifestIntact: false, wantErr: true, artifactSize: 8000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var arm atomic.Bool
			h := newHarness(t, withGateHook(func(c candidate) {
				if arm.Load() {
					tc.alter(t, c)
				}
			}))
			prevData := payload(8000, 1)
			prev := h.mustPut(10, 1, prevData)

			arm.Store(true)
			id, closeErr := h.put(20, 1, payload(8000, 2))
			err := closeErr
			if err == nil {
				t.Fatal("Close accepted an artifact that differs from its manifest")
			}
			if !errors.Is(err, ErrGateRejected) || !IsCorrupt(err) {
				t.Fatalf("Close error %v does not match ErrGateRejected / ErrCorrupt", err)
			}
			g := asGate(t, err)
			if g.Op != OpSeal || g.ID != id || g.Index != 20 || g.Term != 1 {
				t.Fatalf("diagnostic names the wrong candidate: %+v", g)
			}
			if g.SizeEqual != tc.sizeEqual || g.DigestEqual != tc.digestEqual || g.ManifestIntact != tc.manifestIntact {
				t.Fatalf("flags size=%v digest=%v manifest=%v, want %v %v %v",
					g.SizeEqual, g.DigestEqual, g.ManifestIntact, tc.sizeEqual, tc.digestEqual, tc.manifestIntact)
			}
			wantDigestLen := 64
			if tc.artifactSize < 0 {
				wantDigestLen = 0 // nothing could be read
			}
			if g.ManifestSize != 8000 || g.ArtifactSize != tc.artifactSize || len(g.ManifestDigest) != 64 || len(g.ArtifactDigest) != wantDigestLen {
				t.Fatalf("sizes/digests not recorded: %+v", g)
			}
			if (g.Cause != nil) != tc.wantErr {
				t.Fatalf("cause = %v, want error %v", g.Cause, tc.wantErr)
			}
			if g.ArtifactPath != filepath.Join(h.dir, id+tmpSuffix, artifactName) {
				t.Fatalf("artifact path %s", g.ArtifactPath)
			}

			// Nothing published in its place; the previous snapshot stays.
			if got := h.listIDs(); !slices.Equal(got, []string{prev}) {
				t.Fatalf("List = %v, want only the previous %s", got, prev)
			}
			if got := h.read(prev); !bytes.Equal(got, prevData) {
				t.Fatal("previous snapshot no longer reads back")
			}
			if _, err := os.Lstat(filepath.Join(h.dir, id)); !os.IsNotExist(err) {
				t.Fatalf("a published directory exists for the rejected candidate: %v", err)
			}
			if _, _, err := h.s.Open(id); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Open(rejected) = %v, want ErrNotFound", err)
			}
			if got, want := h.entries(), []string{prev, rejectedPrefix + id}; !slices.Equal(got, want) {
				t.Fatalf("store dir = %v, want %v", got, want)
			}

			// The candidate is kept with its diagnostic.
			kept := filepath.Join(h.dir, rejectedPrefix+id)
			if g.KeptDir != kept {
				t.Fatalf("KeptDir = %q, want %q", g.KeptDir, kept)
			}
			raw, err := os.ReadFile(filepath.Join(kept, diagnosticName))
			if err != nil {
				t.Fatal(err)
			}
			var d diagnostic
			if err := json.Unmarshal(raw, &d); err != nil {
				t.Fatal(err)
			}
			if d.Gate.SizeEqual != g.SizeEqual || d.Gate.DigestEqual != g.DigestEqual ||
				d.Gate.ArtifactDigest != g.ArtifactDigest || d.Gate.ManifestDigest != g.ManifestDigest ||
				d.Gate.ArtifactSize != g.ArtifactSize || d.Manifest.ID != id || d.Gate.KeptDir != kept {
				t.Fatalf("kept diagnostic %+v does not match %+v", d.Gate, g)
			}
			if _, err := os.Stat(filepath.Join(kept, manifestName)); err != nil {
				t.Fatalf("kept candidate lost its manifest: %v", err)
			}

			// Reported as an event and in the log, never with contents.
			rej := h.ev.of(Rejected)
			if len(rej) != 1 || rej[0].Err != error(g) || rej[0].Path != kept || rej[0].Manifest.ID != id {
				t.Fatalf("Rejected events = %+v", rej)
			}
			if len(h.ev.of(Sealed)) != 1 {
				t.Fatalf("Sealed events = %+v, want only the previous", h.ev.of(Sealed))
			}
			logs := h.log.String()
			if !strings.Contains(logs, "rejected by the consistency gate") {
				t.Fatalf("rejection not logged:\n%s", logs)
			}
			for _, where := range []string{string(raw), closeErr.Error(), logs} {
				if strings.Contains(where, secret) {
					t.Fatal("artifact contents leaked into a diagnostic")
				}
			}

			// A reopened store still serves only the previous snapshot.
			h.s = h.open()
			if got := h.listIDs(); !slices.Equal(got, []string{prev}) {
				t.Fatalf("after reopen List = %v", got)
			}
		})
	}
}

func TestGateRejectionIsStickyOnSecondClose(t *testing.T) {
	h := newHarness(t, withGateHook(func(c candidate) { appendByte(t, c.Artifact) }))
	sk, err := h.s.Create(1, 5, 1, testConfiguration(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := sk.Close()
	if !errors.Is(first, ErrGateRejected) {
		t.Fatalf("Close = %v", first)
	}
	if second := sk.Close(); second != first {
		t.Fatalf("second Close = %v, want the first rejection", second)
	}
}

func TestRejectedCandidatesBounded(t *testing.T) {
	h := newHarness(t, WithKeepRejected(2), withGateHook(func(c candidate) { appendByte(t, c.Artifact) }))
	for i := uint64(1); i <= 5; i++ {
		if _, err := h.put(i, 1, []byte("x")); !errors.Is(err, ErrGateRejected) {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	var kept []string
	for _, n := range h.entries() {
		if !strings.HasPrefix(n, rejectedPrefix) {
			t.Fatalf("unexpected entry %s", n)
		}
		kept = append(kept, n)
	}
	if len(kept) != 2 {
		t.Fatalf("kept %v, want 2", kept)
	}
	if len(h.ev.of(Rejected)) != 5 {
		t.Fatalf("%d Rejected events, want 5", len(h.ev.of(Rejected)))
	}
}

func TestRejectedCandidateNotKeptWhenDisabled(t *testing.T) {
	h := newHarness(t, WithKeepRejected(0), withGateHook(func(c candidate) { flipByte(t, c.Artifact, 0) }))
	_, err := h.put(1, 1, []byte("abc"))
	g := asGate(t, err)
	if g.KeptDir != "" || len(h.entries()) != 0 {
		t.Fatalf("KeptDir %q, dir %v", g.KeptDir, h.entries())
	}
}
