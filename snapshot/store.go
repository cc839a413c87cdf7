package snapshot

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal/vfs"
)

// On-disk names inside the store directory (see docs/snapshot.md).
const (
	artifactName   = "state.bin"
	manifestName   = "manifest.bin"
	diagnosticName = "diagnostic.json"
	tmpSuffix      = ".tmp"   // candidate under construction
	trashSuffix    = ".trash" // published snapshot being pruned
	rejectedPrefix = "rejected-"
)

var _ raft.SnapshotStore = (*Store)(nil)

// Store is a raft.SnapshotStore that seals every snapshot with a manifest
// and publishes it only after a consistency gate re-reads it from disk. It
// is safe for concurrent use.
type Store struct {
	dir  string
	opts options
	log  hclog.Logger

	// mu serialises the directory operations that change what is published
	// (publish, reject, prune) so retention sees a stable set.
	mu sync.Mutex
}

// Open opens (creating it if needed) the store in dir. Leftovers of a crash
// — candidate directories (*.tmp) and half-pruned snapshots (*.trash) — are
// removed; published snapshots and kept rejected candidates are left alone.
func Open(dir string, opts ...Option) (*Store, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.logger == nil {
		o.logger = hclog.New(&hclog.LoggerOptions{Name: "snapshot"})
	}
	if err := vfs.MkdirAll(o.fs, dir, 0o755); err != nil { // durable: a first start's directory
		return nil, fmt.Errorf("snapshot: create store dir: %w", err)
	}
	s := &Store{dir: dir, opts: o, log: o.logger}
	if err := s.removeLeftovers(); err != nil {
		return nil, err
	}
	return s, nil
}

// Dir returns the store directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) removeLeftovers() error {
	names, err := s.opts.fs.ReadDirNames(s.dir)
	if err != nil {
		return fmt.Errorf("snapshot: scan store dir: %w", err)
	}
	removed := false
	for _, name := range names {
		if !strings.HasSuffix(name, tmpSuffix) && !strings.HasSuffix(name, trashSuffix) {
			continue
		}
		path := filepath.Join(s.dir, name)
		s.log.Warn("removing leftover of an interrupted snapshot", "path", path)
		if err := s.opts.fs.RemoveAll(path); err != nil {
			return fmt.Errorf("snapshot: remove leftover %s: %w", path, err)
		}
		removed = true
	}
	if removed {
		return s.syncDir(s.dir)
	}
	return nil
}

// Create starts a candidate snapshot. raft streams the state into the
// returned sink and calls Close (which runs the gate) or Cancel.
func (s *Store) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, _ raft.Transport) (raft.SnapshotSink, error) {
	if version != 1 {
		return nil, fmt.Errorf("%w: %d", ErrUnsupportedVersion, version)
	}
	m := &Manifest{
		FormatVersion:      FormatVersion,
		SnapshotVersion:    version,
		Index:              index,
		Term:               term,
		Configuration:      cloneConfiguration(configuration),
		ConfigurationIndex: configurationIndex,
		Created:            time.Now().UTC(),
	}
	base := fmt.Sprintf("%d-%d-%d", term, index, m.Created.UnixMilli())
	m.ID = base
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%w: index %d term %d: %w", ErrInvalidMeta, index, term, err)
	}
	var tmp string
	for n := 1; ; n++ {
		tmp = filepath.Join(s.dir, m.ID+tmpSuffix)
		if _, err := s.opts.fs.Stat(filepath.Join(s.dir, m.ID)); errors.Is(err, fs.ErrNotExist) {
			err = s.opts.fs.Mkdir(tmp, 0o755)
			if err == nil {
				break
			}
			if !errors.Is(err, fs.ErrExist) {
				return nil, fmt.Errorf("snapshot: create candidate %s: %w", tmp, err)
			}
		}
		if n > 1000 {
			return nil, fmt.Errorf("snapshot: no free candidate name for %s", base)
		}
		m.ID = base + "-" + strconv.Itoa(n)
	}
	sk, err := newSink(s, m, tmp)
	if err != nil {
		_ = s.opts.fs.RemoveAll(tmp)
		return nil, err
	}
	s.log.Debug("creating snapshot candidate", "id", m.ID, "index", index, "term", term, "path", tmp)
	return sk, nil
}

// published is one published snapshot as found on disk.
type published struct {
	dir string
	m   *Manifest
}

// scan reads every published snapshot directory. Snapshots whose manifest
// fails validation, names another ID, or whose artifact length differs from
// the manifest are returned in bad (with their error), never in good. good
// is sorted newest first.
func (s *Store) scan() (good []published, bad []Event, err error) {
	names, err := s.opts.fs.ReadDirNames(s.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: scan store dir: %w", err)
	}
	for _, name := range names {
		dir := filepath.Join(s.dir, name)
		if !idPattern.MatchString(name) || !isDir(s.opts.fs, dir) {
			continue // candidates, trash, rejected-*, foreign files
		}
		m, err := readManifest(s.opts.fs, dir, name)
		if err != nil {
			bad = append(bad, Event{Kind: Refused, Path: dir, Err: err})
			continue
		}
		if fi, err := s.opts.fs.Stat(filepath.Join(dir, artifactName)); err != nil || fi.Size() != m.Size {
			bad = append(bad, Event{Kind: Refused, Path: dir, Manifest: m, Err: s.lengthRefused(m, dir, fi, err)})
			continue
		}
		good = append(good, published{dir: dir, m: m})
	}
	sort.Slice(good, func(i, j int) bool { return newer(good[i].m, good[j].m) })
	return good, bad, nil
}

// lengthRefused is the diagnostic of an artifact whose length (fi, or the
// error err that prevented reading it) is not its manifest's. Only the
// length was read: ArtifactDigest stays empty (not computed) and
// DigestEqual false (not established).
func (s *Store) lengthRefused(m *Manifest, dir string, fi fs.FileInfo, err error) *GateError {
	g := s.gateError(OpOpen, m, dir)
	g.ManifestIntact = true
	if err != nil {
		g.ArtifactSize, g.Cause, g.CauseText = -1, err, err.Error()
	} else {
		g.ArtifactSize = fi.Size()
	}
	return g
}

// readManifest reads and validates dir's manifest and checks that it names
// the snapshot id.
func readManifest(fsys FS, dir, id string) (*Manifest, error) {
	path := filepath.Join(dir, manifestName)
	b, err := readFile(fsys, path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &ManifestError{Path: path, Problems: []string{"manifest file is missing"}}
		}
		return nil, fmt.Errorf("snapshot: read manifest %s: %w", path, err)
	}
	m, err := DecodeManifest(b)
	if err != nil {
		var me *ManifestError
		if errors.As(err, &me) {
			me.Path = path
		}
		return nil, err
	}
	if m.ID != id {
		return nil, &ManifestError{Path: path, Problems: []string{fmt.Sprintf("manifest id %q in directory %q", m.ID, id)}}
	}
	return m, nil
}

// List returns the published snapshots that pass manifest validation, newest
// first, at most the retain count. Snapshots that fail are reported (Refused
// event and a log line) and skipped.
func (s *Store) List() ([]*raft.SnapshotMeta, error) {
	good, bad, err := s.scan()
	if err != nil {
		return nil, err
	}
	s.report(bad)
	var out []*raft.SnapshotMeta
	for _, p := range good {
		if len(out) == s.opts.retain {
			break
		}
		out = append(out, p.m.meta())
	}
	return out, nil
}

func (s *Store) report(bad []Event) {
	for _, ev := range bad {
		s.log.Error("refusing published snapshot that fails verification", "path", ev.Path, "error", ev.Err)
		s.emit(ev)
	}
}

// Open returns the published snapshot id's metadata and a reader of its
// artifact at once, after the cheap checks: the manifest decodes, passes
// Validate and names id, and the artifact file has the manifest's size
// (stat). A snapshot that fails them is refused with a *GateError or
// *ManifestError (IsCorrupt) and no byte is handed out.
//
// The reader verifies as it is read: it hashes every byte and withholds
// the artifact's final bytes (up to 64 KiB) until it has read the file to
// its end and found its size and SHA-256 equal to the manifest's. If they
// differ, or the file cannot be read, it ends in a *GateError instead of
// handing them out (and the store reports it: a Refused event and an ERROR
// line). So no consumer ever receives the whole of an artifact that
// differs from its manifest, nor a clean io.EOF after one: raft's receiver
// reads exactly the snapshot's size and fails a short stream, and a state
// machine that reads its stream to io.EOF (fsm) fails the restore.
func (s *Store) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	m, dir, err := s.published(id)
	if err != nil {
		return nil, nil, err
	}
	path := filepath.Join(dir, artifactName)
	f, err := s.opts.fs.OpenFile(path, os.O_RDONLY, 0)
	var fi fs.FileInfo
	if err == nil {
		if fi, err = s.opts.fs.Stat(path); err != nil {
			_ = f.Close()
		}
	}
	if err != nil || fi.Size() != m.Size {
		if err == nil {
			_ = f.Close()
		}
		g := s.lengthRefused(m, dir, fi, err)
		s.report([]Event{{Kind: Refused, Path: dir, Manifest: m, Err: g}})
		return nil, nil, g
	}
	fail := func(g *GateError) { s.report([]Event{{Kind: Refused, Path: dir, Manifest: m, Err: g}}) }
	return m.meta(), newVerifyingReader(f, m, s.gateError(OpOpen, m, dir), fail), nil
}

// Verify reads the published snapshot id's whole artifact and checks its
// size and SHA-256 against the manifest (Open, read to the end). It returns
// the snapshot's metadata, or the error Open or its reader ended in (a
// *GateError or *ManifestError for a corrupt snapshot, reported as Open
// reports it). A member's start-up uses it to know which snapshot raft will
// restore before raft reads the log from it.
func (s *Store) Verify(id string) (*raft.SnapshotMeta, error) {
	meta, rc, err := s.Open(id)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return nil, err
	}
	return meta, nil
}

// published reads and validates the manifest of the published snapshot id.
// A corrupt manifest is reported (Refused) and returned.
func (s *Store) published(id string) (*Manifest, string, error) {
	if !idPattern.MatchString(id) {
		return nil, "", fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	dir := filepath.Join(s.dir, id)
	if !isDir(s.opts.fs, dir) {
		return nil, "", fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	m, err := readManifest(s.opts.fs, dir, id)
	if err != nil {
		if IsCorrupt(err) {
			s.report([]Event{{Kind: Refused, Path: dir, Err: err}})
		}
		return nil, "", err
	}
	return m, dir, nil
}

// prune removes published snapshots beyond the retain count, oldest first.
// Each is first renamed to *.trash so a crash mid-removal never leaves a
// half-deleted snapshot that looks published. Call with s.mu held.
func (s *Store) prune() ([]Event, error) {
	good, _, err := s.scan()
	if err != nil {
		return nil, err
	}
	var evs []Event
	for i := s.opts.retain; i < len(good); i++ {
		p := good[i]
		trash := p.dir + trashSuffix
		if err := s.opts.fs.Rename(p.dir, trash); err != nil {
			return evs, fmt.Errorf("snapshot: prune %s: %w", p.dir, err)
		}
		if err := s.syncDir(s.dir); err != nil {
			return evs, err
		}
		if err := s.opts.fs.RemoveAll(trash); err != nil {
			return evs, fmt.Errorf("snapshot: prune %s: %w", trash, err)
		}
		s.log.Info("pruned snapshot", "id", p.m.ID, "index", p.m.Index, "term", p.m.Term)
		evs = append(evs, Event{Kind: Pruned, Path: p.dir, Manifest: p.m})
	}
	return evs, nil
}

func (s *Store) emit(ev Event) {
	if s.opts.onEvent != nil {
		s.opts.onEvent(ev)
	}
}

// syncDir fsyncs a directory so renames and removals in it are durable.
func (s *Store) syncDir(dir string) error {
	if !s.opts.sync {
		return nil
	}
	if err := s.opts.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("snapshot: sync dir %s: %w", dir, err)
	}
	return nil
}
