package snapshot

import "path/filepath"

// Manifest returns the manifest of the published snapshot id, read from
// disk and validated (it names id). It does not check the artifact: Open
// does.
func (s *Store) Manifest(id string) (*Manifest, error) {
	return readManifest(s.opts.fs, filepath.Join(s.dir, id), id)
}
