package snapshot

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// corruption alters a published artifact on disk.
type corruption struct {
	name  string
	apply func(t *testing.T, path string, size int64)
}

var corruptions = []corruption{
	{"bit flip at the start", func(t *testing.T, path string, _ int64) { flipByte(t, path, 0) }},
	{"bit flip in the middle", func(t *testing.T, path string, size int64) { flipByte(t, path, size/2) }},
	{"bit flip in the last byte", func(t *testing.T, path string, size int64) { flipByte(t, path, size-1) }},
	{"truncation by one byte", func(t *testing.T, path string, size int64) { truncate(t, path, size-1) }},
	{"truncation to half", func(t *testing.T, path string, size int64) { truncate(t, path, size/2) }},
	{"extension by one byte", func(t *testing.T, path string, _ int64) { appendTo(t, path, []byte{0}) }},
	{"extension by a megabyte", func(t *testing.T, path string, _ int64) { appendTo(t, path, make([]byte, 1<<20)) }},
}

// A corrupted artifact is never handed out whole: read through Store.Open
// it ends in a *GateError, before its final bytes, whether it was altered
// before Open (a bit flip passes Open's length check; a length change is
// refused by Open at once) or after Open returned (the reader alone
// catches it). A good artifact streams identical bytes and ends in io.EOF.
func TestOpenedCorruptArtifactIsNeverDeliveredWhole(t *testing.T) {
	const size = 3<<20 + 12345 // not a multiple of any buffer
	for _, after := range []bool{false, true} {
		for _, c := range corruptions {
			when := "before Open"
			if after {
				when = "after Open"
			}
			t.Run(c.name+" "+when, func(t *testing.T) {
				h := newHarness(t)
				data := payload(size, 3)
				id := h.mustPut(10, 1, data)
				path := filepath.Join(h.dir, id, artifactName)
				if !after {
					c.apply(t, path, size)
				}
				_, rc, err := h.s.Open(id)
				if err != nil {
					// Only a length change may be refused at Open.
					g := asGate(t, err)
					if after || g.SizeEqual || g.Op != OpOpen || !g.ManifestIntact {
						t.Fatalf("Open refused with %+v", g)
					}
					return
				}
				defer rc.Close()
				if after {
					c.apply(t, path, size)
				}
				got, err := io.ReadAll(rc)
				if int64(len(got)) >= size {
					t.Fatalf("the reader handed out %d bytes of a corrupted %d-byte artifact", len(got), size)
				}
				g := asGate(t, err)
				if g.SizeEqual && g.DigestEqual {
					t.Fatalf("diagnostic = %+v", g)
				}
				if !errors.Is(err, ErrGateRejected) || !IsCorrupt(err) {
					t.Fatalf("%v does not match ErrGateRejected / ErrCorrupt", err)
				}
				// Sticky: a consumer that reads on gets the same refusal.
				if n, err2 := rc.Read(make([]byte, 1<<20)); n != 0 || err2 != err {
					t.Fatalf("Read after the refusal = %d, %v", n, err2)
				}
				if ev := h.ev.of(Refused); len(ev) != 1 || ev[0].Err != error(g) {
					t.Fatalf("Refused events = %+v", ev)
				}
				if strings.Contains(err.Error(), secret) || strings.Contains(h.log.String(), secret) {
					t.Fatal("contents leaked into the error or the log")
				}
			})
		}
	}
	t.Run("intact", func(t *testing.T) {
		h := newHarness(t)
		data := payload(size, 3)
		id := h.mustPut(10, 1, data)
		_, rc, err := h.s.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		var got bytes.Buffer
		// Odd read sizes cross the withheld tail's boundary anywhere.
		buf := make([]byte, 7919)
		for {
			n, err := rc.Read(buf)
			got.Write(buf[:n])
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got.Bytes(), data) {
			t.Fatalf("read %d bytes, not the %d written", got.Len(), len(data))
		}
		if ev := h.ev.of(Refused); len(ev) != 0 {
			t.Fatalf("Refused events = %+v", ev)
		}
	})
}

// Open hands out its first byte without reading the artifact first: the
// time to the first byte does not grow with the artifact.
func TestOpenReadsNoArtifactBeforeTheFirstByte(t *testing.T) {
	h := newHarness(t)
	data := payload(8<<20, 5)
	id := h.mustPut(10, 1, data)
	path := filepath.Join(h.dir, id, artifactName)
	// Open and the first read succeed while the artifact's end is
	// corrupt: had Open read the whole artifact, it would have refused.
	flipByte(t, path, int64(len(data))-1)
	_, rc, err := h.s.Open(id)
	if err != nil {
		t.Fatalf("Open read the artifact before returning: %v", err)
	}
	defer rc.Close()
	first := make([]byte, 4096)
	if _, err := io.ReadFull(rc, first); err != nil {
		t.Fatalf("first read: %v", err)
	}
	if !bytes.Equal(first, data[:4096]) {
		t.Fatal("first bytes differ")
	}
	if _, err := io.Copy(io.Discard, rc); !errors.Is(err, ErrGateRejected) {
		t.Fatalf("read to the end = %v, want ErrGateRejected", err)
	}
}

// An empty artifact is checked too: nothing is withheld, and a byte
// appended after Open fails it.
func TestOpenEmptyArtifact(t *testing.T) {
	h := newHarness(t)
	id := h.mustPut(10, 1, nil)
	if _, err := h.s.Verify(id); err != nil {
		t.Fatalf("Verify(empty) = %v", err)
	}
	_, rc, err := h.s.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	appendTo(t, filepath.Join(h.dir, id, artifactName), []byte{1})
	if n, err := rc.Read(make([]byte, 16)); n != 0 || !errors.Is(err, ErrGateRejected) {
		t.Fatalf("Read = %d, %v", n, err)
	}
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func appendTo(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}
