package raft

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/snapshot"
	"github.com/jobraft/jobraft/wal/vfs"
)

// ErrSeedExisting is returned by Seed when the data dir already holds a
// log or snapshots: a seed only ever starts a new member.
var ErrSeedExisting = errors.New("raft: data dir already holds member state")

// Seed prepares an empty data dir so that Open starts a member of a new
// cluster from a state machine snapshot (a restored backup): it publishes
// artifact (the state machine's snapshot stream, Snapshot.Persist, at
// applied index index) as a
// sealed snapshot whose configuration is members. Seed every member of the
// new cluster from the same artifact with the same members, then Open them
// (Bootstrap is ignored: the member has state). The snapshot is labelled
// term 1, so the new cluster's first election (term 1) continues the log
// after index with non-decreasing terms; nothing of the old cluster's log
// or terms is carried over.
//
// Seed writes nothing when the data dir holds a log or snapshots
// (ErrSeedExisting), and publishes nothing when the artifact cannot be
// sealed (the snapshot store's gate rejected it).
func Seed(dataDir string, members []Member, index uint64, artifact io.Reader) error {
	if index == 0 {
		return invalidConfig("seed: index 0")
	}
	if len(members) == 0 {
		return invalidConfig("seed: no members")
	}
	var conf hraft.Configuration
	seen, voters := map[string]bool{}, 0
	for _, m := range members {
		if m.ID == "" || m.Address == "" {
			return invalidConfig("seed: member %q at %q: ID and address are required", m.ID, m.Address)
		}
		if seen["id:"+m.ID] || seen["addr:"+m.Address] {
			return invalidConfig("seed: member %q at %q: ID or address given twice", m.ID, m.Address)
		}
		seen["id:"+m.ID], seen["addr:"+m.Address] = true, true
		if m.Voter {
			voters++
		}
		s := hraft.Voter
		if !m.Voter {
			s = hraft.Nonvoter
		}
		conf.Servers = append(conf.Servers, hraft.Server{Suffrage: s, ID: hraft.ServerID(m.ID), Address: hraft.ServerAddress(m.Address)})
	}
	if voters == 0 {
		return invalidConfig("seed: no voter among the members")
	}
	for _, sub := range []string{"log", "snapshots"} {
		if _, err := os.Lstat(filepath.Join(dataDir, sub)); err == nil {
			return fmt.Errorf("%w: %s exists", ErrSeedExisting, filepath.Join(dataDir, sub))
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := vfs.MkdirAll(vfs.OSFS{}, dataDir, 0o755); err != nil { // durable, with the snapshot
		return err
	}
	dir := filepath.Join(dataDir, "snapshots")
	store, err := snapshot.Open(dir, snapshot.WithLogger(hclog.NewNullLogger()))
	if err != nil {
		return fmt.Errorf("raft: seed: %w", err)
	}
	sink, err := store.Create(1, index, 1, conf, index, nil)
	if err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("raft: seed: %w", err)
	}
	// The adapter's snapshot layout: the applied index, then the state
	// machine's stream (adapter.go).
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], index)
	if _, err := io.Copy(sink, io.MultiReader(bytes.NewReader(hdr[:]), artifact)); err != nil {
		_ = sink.Cancel()
		_ = os.RemoveAll(dir)
		return fmt.Errorf("raft: seed: %w", err)
	}
	if err := sink.Close(); err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("raft: seed: %w", err)
	}
	return nil
}
