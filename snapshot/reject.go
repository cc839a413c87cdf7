package snapshot

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// diagnostic is what a kept rejected candidate holds beside its files, in
// diagnostic.json. Paths, sizes, digests, flags — never contents.
type diagnostic struct {
	Gate     *GateError   `json:"gate"`
	Manifest manifestBody `json:"manifest"` // as sealed, configuration omitted
	Rejected string       `json:"rejected"` // RFC 3339, UTC
}

// reject handles a candidate the gate refused: it is never published. The
// diagnostic is written into the candidate, which is renamed to
// rejected-<id> (the newest few are kept) or removed, then logged and sent
// as an event. It returns g.
func (s *Store) reject(m *Manifest, dir string, g *GateError) error {
	s.mu.Lock()
	kept := s.keepRejected(m, dir, g)
	s.mu.Unlock()
	if !kept {
		if err := s.opts.fs.RemoveAll(dir); err != nil {
			s.log.Error("failed to remove rejected snapshot candidate", "path", dir, "error", err)
		}
	}
	s.log.Error("snapshot candidate rejected by the consistency gate; nothing published",
		"id", g.ID, "index", g.Index, "term", g.Term,
		"artifact", g.ArtifactPath, "manifest", g.ManifestPath, "kept", g.KeptDir,
		"manifest_size", g.ManifestSize, "artifact_size", g.ArtifactSize, "size_equal", g.SizeEqual,
		"manifest_sha256", g.ManifestDigest, "artifact_sha256", g.ArtifactDigest, "digest_equal", g.DigestEqual,
		"manifest_intact", g.ManifestIntact, "cause", g.CauseText)
	path := g.KeptDir
	if path == "" {
		path = dir
	}
	s.emit(Event{Kind: Rejected, Path: path, Manifest: m, Err: g})
	return g
}

// keepRejected moves the candidate to rejected-<id> with its diagnostic and
// bounds the number kept. It reports whether the candidate was kept. Call
// with s.mu held.
func (s *Store) keepRejected(m *Manifest, dir string, g *GateError) bool {
	if s.opts.keepRejected == 0 {
		return false
	}
	target := filepath.Join(s.dir, rejectedPrefix+m.ID)
	for n := 1; ; n++ {
		if _, err := s.opts.fs.Stat(target); os.IsNotExist(err) {
			break
		}
		target = filepath.Join(s.dir, rejectedPrefix+m.ID+"."+strconv.Itoa(n))
	}
	g.KeptDir = target
	d := diagnostic{Gate: g, Manifest: manifestBody{
		ID: m.ID, SnapshotVersion: int(m.SnapshotVersion), Index: m.Index, Term: m.Term,
		ConfigurationIndex: m.ConfigurationIndex, Size: m.Size,
		DigestSHA256: hex.EncodeToString(m.Digest[:]), Created: m.Created.Format(time.RFC3339Nano),
	}, Rejected: time.Now().UTC().Format(time.RFC3339Nano)}
	b, err := json.MarshalIndent(d, "", "  ")
	if err == nil {
		err = writeFileSync(s.opts.fs, filepath.Join(dir, diagnosticName), append(b, '\n'), s.opts.sync)
	}
	if err == nil {
		err = s.opts.fs.Rename(dir, target)
	}
	if err == nil {
		err = s.syncDir(s.dir)
	}
	if err != nil {
		s.log.Error("failed to keep rejected snapshot candidate", "path", dir, "error", err)
		if _, serr := s.opts.fs.Stat(target); serr != nil {
			g.KeptDir = ""
			return false
		}
	}
	s.boundRejected()
	return true
}

// boundRejected removes the oldest kept rejected candidates beyond the
// limit. Failures are logged: they only leave extra evidence behind.
func (s *Store) boundRejected() {
	names, err := s.opts.fs.ReadDirNames(s.dir)
	if err != nil {
		s.log.Error("failed to scan for rejected candidates", "error", err)
		return
	}
	type kept struct {
		path string
		mod  time.Time
	}
	var all []kept
	for _, name := range names {
		path := filepath.Join(s.dir, name)
		if !strings.HasPrefix(name, rejectedPrefix) || !isDir(s.opts.fs, path) {
			continue
		}
		mod := time.Time{}
		if fi, err := s.opts.fs.Stat(filepath.Join(path, diagnosticName)); err == nil {
			mod = fi.ModTime()
		}
		all = append(all, kept{path, mod})
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].mod.Equal(all[j].mod) {
			return all[i].mod.After(all[j].mod)
		}
		return all[i].path > all[j].path
	})
	for i := s.opts.keepRejected; i < len(all); i++ {
		if err := s.opts.fs.RemoveAll(all[i].path); err != nil {
			s.log.Error("failed to remove old rejected candidate", "path", all[i].path, "error", fmt.Sprint(err))
			continue
		}
		s.log.Info("removed old rejected candidate", "path", all[i].path)
	}
}
