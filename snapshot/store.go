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
			g := s.gateError(OpOpen, m, dir)
			if err != nil {
				g.Cause, g.CauseText = err, err.Error()
				g.ArtifactSize = -1
			} else {
				g.ArtifactSize = fi.Size()
			}
			// List reads no artifact: ArtifactDigest stays empty (not
			// computed) and DigestEqual false (not established).
			g.ManifestIntact = true
			bad = append(bad, Event{Kind: Refused, Path: dir, Manifest: m, Err: g})
			continue
		}
		good = append(good, published{dir: dir, m: m})
	}
	sort.Slice(good, func(i, j int) bool { return newer(good[i].m, good[j].m) })
	return good, bad, nil
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

// Open verifies the published snapshot id against its manifest — reading
// the whole artifact once, computing its size and SHA-256 — and only then
// returns a reader positioned at its start. A snapshot that fails is refused
// with a *GateError or *ManifestError (IsCorrupt) and no byte is handed
// out. The returned reader checks the bytes again as they are read and
// reports a *GateError instead of io.EOF if they changed in between.
func (s *Store) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	if !idPattern.MatchString(id) {
		return nil, nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	dir := filepath.Join(s.dir, id)
	if !isDir(s.opts.fs, dir) {
		return nil, nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	m, err := readManifest(s.opts.fs, dir, id)
	if err != nil {
		if IsCorrupt(err) {
			s.report([]Event{{Kind: Refused, Path: dir, Err: err}})
		}
		return nil, nil, err
	}
	f, err := s.opts.fs.OpenFile(filepath.Join(dir, artifactName), os.O_RDONLY, 0)
	if err != nil {
		g := s.gateError(OpOpen, m, dir)
		g.ManifestIntact, g.ArtifactSize, g.Cause, g.CauseText = true, -1, err, err.Error()
		s.report([]Event{{Kind: Refused, Path: dir, Manifest: m, Err: g}})
		return nil, nil, g
	}
	size, digest, rerr := digestReader(fileReader(f))
	if g := s.check(OpOpen, m, dir, size, digest, rerr); g != nil {
		_ = f.Close()
		g.ManifestIntact = true
		s.report([]Event{{Kind: Refused, Path: dir, Manifest: m, Err: g}})
		return nil, nil, g
	}
	return m.meta(), newVerifyingReader(f, m, s.gateError(OpOpen, m, dir)), nil
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
