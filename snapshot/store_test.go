package snapshot

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"
)

func TestRoundTripThroughSnapshotStoreAPI(t *testing.T) {
	h := newHarness(t)
	var store raft.SnapshotStore = h.s
	data := payload(10_000, 3)
	sk, err := store.Create(1, 42, 7, testConfiguration(), 40, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sk.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := sk.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	metas, err := store.List()
	if err != nil || len(metas) != 1 {
		t.Fatalf("List = %v, %v; want one snapshot", metas, err)
	}
	want := &raft.SnapshotMeta{Version: 1, ID: sk.ID(), Index: 42, Term: 7,
		Configuration: testConfiguration(), ConfigurationIndex: 40, Size: int64(len(data))}
	if !reflect.DeepEqual(metas[0], want) {
		t.Fatalf("List meta = %+v, want %+v", metas[0], want)
	}
	meta, rc, err := store.Open(sk.ID())
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(meta, want) || !bytes.Equal(got, data) {
		t.Fatalf("Open = %+v, %d bytes; want %+v, %d bytes", meta, len(got), want, len(data))
	}
	if ev := h.ev.of(Sealed); len(ev) != 1 || ev[0].Manifest.ID != sk.ID() || ev[0].Manifest.Size != int64(len(data)) {
		t.Fatalf("Sealed events = %+v", ev)
	}
	if !slices.Equal(h.entries(), []string{sk.ID()}) {
		t.Fatalf("store dir = %v, want only %s", h.entries(), sk.ID())
	}
}

func TestEmptyArtifact(t *testing.T) {
	h := newHarness(t)
	id := h.mustPut(1, 1, nil)
	if got := h.read(id); len(got) != 0 {
		t.Fatalf("read %d bytes from an empty snapshot", len(got))
	}
}

func TestListNewestFirstAndRetention(t *testing.T) {
	h := newHarness(t, WithRetain(2))
	// (term, index) out of order: List must sort by term first, then index.
	order := []struct{ index, term uint64 }{{10, 1}, {30, 1}, {20, 2}, {5, 3}, {25, 2}}
	ids := map[[2]uint64]string{}
	for _, o := range order {
		ids[[2]uint64{o.index, o.term}] = h.mustPut(o.index, o.term, payload(100, byte(o.index)))
	}
	want := []string{ids[[2]uint64{5, 3}], ids[[2]uint64{25, 2}]}
	if got := h.listIDs(); !slices.Equal(got, want) {
		t.Fatalf("List = %v, want %v", got, want)
	}
	if got := h.entries(); !slices.Equal(got, sortedCopy(want)) {
		t.Fatalf("store dir = %v, want %v", got, want)
	}
	if n := len(h.ev.of(Pruned)); n != 3 {
		t.Fatalf("%d Pruned events, want 3", n)
	}
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

func TestSameTermIndexGetsDistinctIDs(t *testing.T) {
	h := newHarness(t, WithRetain(5))
	a, err := h.s.Create(1, 9, 2, testConfiguration(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.s.Create(1, 9, 2, testConfiguration(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID() == b.ID() {
		t.Fatalf("two candidates share ID %s", a.ID())
	}
	for _, sk := range []raft.SnapshotSink{a, b} {
		if _, err := sk.Write([]byte(sk.ID())); err != nil {
			t.Fatal(err)
		}
		if err := sk.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, sk := range []raft.SnapshotSink{a, b} {
		if got := string(h.read(sk.ID())); got != sk.ID() {
			t.Fatalf("snapshot %s holds %q", sk.ID(), got)
		}
	}
}

func TestCancelDiscardsCandidate(t *testing.T) {
	h := newHarness(t)
	prev := h.mustPut(5, 1, []byte("prev"))
	sk, err := h.s.Create(1, 6, 1, testConfiguration(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sk.Write([]byte("half")); err != nil {
		t.Fatal(err)
	}
	if err := sk.Cancel(); err != nil {
		t.Fatal(err)
	}
	if err := sk.Cancel(); err != nil {
		t.Fatalf("second Cancel: %v", err)
	}
	if _, err := sk.Write([]byte("more")); !errors.Is(err, ErrSinkClosed) {
		t.Fatalf("Write after Cancel = %v, want ErrSinkClosed", err)
	}
	if err := sk.Close(); err == nil {
		t.Fatal("Close after Cancel succeeded")
	}
	if got := h.entries(); !slices.Equal(got, []string{prev}) {
		t.Fatalf("store dir = %v, want only %s", got, prev)
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	h := newHarness(t)
	sk, err := h.s.Create(1, 6, 1, testConfiguration(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sk.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sk.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if err := sk.Cancel(); err != nil {
		t.Fatalf("Cancel after Close = %v", err)
	}
	if got := h.listIDs(); !slices.Equal(got, []string{sk.ID()}) {
		t.Fatalf("List = %v", got)
	}
}

func TestCreateRefusesBadMetadata(t *testing.T) {
	h := newHarness(t)
	if _, err := h.s.Create(0, 1, 1, testConfiguration(), 1, nil); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("version 0: %v", err)
	}
	for _, c := range []struct {
		index, term, confIndex uint64
		conf                   raft.Configuration
	}{
		{0, 1, 0, testConfiguration()},
		{1, 0, 1, testConfiguration()},
		{5, 1, 6, testConfiguration()},
		{5, 1, 1, raft.Configuration{Servers: []raft.Server{{ID: "a", Address: "x"}, {ID: "a", Address: "y"}}}},
	} {
		if _, err := h.s.Create(1, c.index, c.term, c.conf, c.confIndex, nil); !errors.Is(err, ErrInvalidMeta) {
			t.Errorf("Create(%+v) = %v, want ErrInvalidMeta", c, err)
		}
	}
	if got := h.entries(); len(got) != 0 {
		t.Fatalf("refused Create left %v", got)
	}
}

func TestOpenOptionsValidated(t *testing.T) {
	if _, err := Open(t.TempDir(), WithRetain(0)); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("WithRetain(0): %v", err)
	}
	if _, err := Open(t.TempDir(), WithKeepRejected(-1)); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("WithKeepRejected(-1): %v", err)
	}
}

func TestOpenUnknownID(t *testing.T) {
	h := newHarness(t)
	h.mustPut(3, 1, []byte("x"))
	for _, id := range []string{"1-2-3", "../etc", "", "rejected-1-2-3", "1-3-1.tmp"} {
		if _, _, err := h.s.Open(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Open(%q) = %v, want ErrNotFound", id, err)
		}
	}
}

func TestCrashLeftoversRemovedOnOpen(t *testing.T) {
	h := newHarness(t)
	id := h.mustPut(7, 2, []byte("published"))
	// Leftovers of crashes at each step: a candidate mid-write, a sealed
	// candidate not yet renamed, a prune interrupted after its rename.
	for _, name := range []string{"2-8-1.tmp", "1-3-3.trash"} {
		dir := filepath.Join(h.dir, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, artifactName), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.CopyFS(filepath.Join(h.dir, "2-9-2.tmp"), os.DirFS(filepath.Join(h.dir, id))); err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(h.dir, rejectedPrefix+"2-6-1")
	if err := os.Mkdir(kept, 0o755); err != nil {
		t.Fatal(err)
	}
	h.s = h.open()
	if got, want := h.entries(), []string{id, rejectedPrefix + "2-6-1"}; !slices.Equal(got, want) {
		t.Fatalf("after reopen store dir = %v, want %v", got, want)
	}
	if got := h.listIDs(); !slices.Equal(got, []string{id}) {
		t.Fatalf("List = %v, want [%s]", got, id)
	}
	if got := string(h.read(id)); got != "published" {
		t.Fatalf("read %q", got)
	}
}

func TestCorruptManifestSkipped(t *testing.T) {
	h := newHarness(t, WithRetain(3))
	older := h.mustPut(10, 1, []byte("older"))
	newer := h.mustPut(20, 1, []byte("newer"))
	flipByte(t, filepath.Join(h.dir, newer, manifestName), headerLen+5)

	if got := h.listIDs(); !slices.Equal(got, []string{older}) {
		t.Fatalf("List = %v, want only %s", got, older)
	}
	refused := h.ev.of(Refused)
	if len(refused) != 1 || refused[0].Path != filepath.Join(h.dir, newer) || !errors.Is(refused[0].Err, ErrManifestInvalid) {
		t.Fatalf("Refused events = %+v", refused)
	}
	_, rc, err := h.s.Open(newer)
	if rc != nil || !IsCorrupt(err) || !errors.Is(err, ErrManifestInvalid) {
		t.Fatalf("Open(corrupt manifest) = %v, %v", rc, err)
	}
	var me *ManifestError
	if !errors.As(err, &me) || !strings.Contains(me.Error(), "crc32c") {
		t.Fatalf("Open error %v does not name the crc mismatch", err)
	}
	if got := string(h.read(older)); got != "older" {
		t.Fatalf("read older = %q", got)
	}
}

func TestManifestInWrongDirectorySkipped(t *testing.T) {
	h := newHarness(t, WithRetain(3))
	a := h.mustPut(10, 1, []byte("a"))
	// A published dir whose manifest names another snapshot.
	if err := os.CopyFS(filepath.Join(h.dir, "1-11-5"), os.DirFS(filepath.Join(h.dir, a))); err != nil {
		t.Fatal(err)
	}
	if got := h.listIDs(); !slices.Equal(got, []string{a}) {
		t.Fatalf("List = %v", got)
	}
	if _, _, err := h.s.Open("1-11-5"); !errors.Is(err, ErrManifestInvalid) {
		t.Fatalf("Open = %v", err)
	}
}

func TestArtifactBitFlipAfterPublicationRefused(t *testing.T) {
	h := newHarness(t, WithRetain(3))
	older := h.mustPut(10, 1, payload(5000, 1))
	newer := h.mustPut(20, 1, payload(5000, 2))
	flipByte(t, filepath.Join(h.dir, newer, artifactName), 4321)

	// Open returns at once (the length is right); the reader refuses.
	meta, rc, err := h.s.Open(newer)
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	defer rc.Close()
	if meta.ID != newer || meta.Size != 5000 {
		t.Fatalf("meta = %+v", meta)
	}
	got, err := io.ReadAll(rc)
	if len(got) != 0 {
		// 5000 bytes are all withheld: an artifact shorter than the withheld
		// tail hands out nothing before it was checked.
		t.Fatalf("the reader handed out %d bytes of a flipped 5000-byte artifact", len(got))
	}
	g := asGate(t, err)
	if g.Op != OpOpen || !g.SizeEqual || g.DigestEqual || !g.ManifestIntact || g.Index != 20 || g.ID != newer {
		t.Fatalf("diagnostic = %+v", g)
	}
	if !errors.Is(err, ErrGateRejected) || !IsCorrupt(err) {
		t.Fatalf("%v does not match ErrGateRejected / ErrCorrupt", err)
	}
	if ev := h.ev.of(Refused); len(ev) != 1 || ev[0].Err != error(g) {
		t.Fatalf("Refused events = %+v", ev)
	}
	if _, err := h.s.Verify(newer); !errors.Is(err, ErrGateRejected) {
		t.Fatalf("Verify = %v, want ErrGateRejected", err)
	}
	if got := h.read(older); !bytes.Equal(got, payload(5000, 1)) {
		t.Fatal("older snapshot unreadable")
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(h.log.String(), secret) {
		t.Fatal("contents leaked into the error or the log")
	}
}

func TestTruncatedArtifactNotListed(t *testing.T) {
	h := newHarness(t, WithRetain(3))
	older := h.mustPut(10, 1, []byte("older"))
	newer := h.mustPut(20, 1, []byte("newer"))
	if err := os.Truncate(filepath.Join(h.dir, newer, artifactName), 2); err != nil {
		t.Fatal(err)
	}
	if got := h.listIDs(); !slices.Equal(got, []string{older}) {
		t.Fatalf("List = %v, want [%s]", got, older)
	}
	g := asGate(t, func() error { _, _, err := h.s.Open(newer); return err }())
	if g.SizeEqual || g.ArtifactSize != 2 || g.ManifestSize != 5 {
		t.Fatalf("diagnostic = %+v", g)
	}
}

// Event callbacks run with no store lock held: they may call the store.
func TestEventCallbackMayCallStore(t *testing.T) {
	var h *harness
	var listed atomic.Int32
	h = newHarness(t, WithRetain(1), WithEvents(func(ev Event) {
		if _, err := h.s.List(); err != nil {
			t.Error(err)
		}
		listed.Add(1)
	}))
	h.mustPut(1, 1, []byte("a"))
	h.mustPut(2, 1, []byte("b")) // Sealed, then Pruned
	if listed.Load() != 3 {
		t.Fatalf("callback ran %d times, want 3", listed.Load())
	}
}
