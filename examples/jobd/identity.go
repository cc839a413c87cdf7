package main

// A data dir's identity: which cluster and which member it belongs to.
//
// jobd writes jobd-identity.json into the data dir at its first start and
// compares it at every later start, before the member opens its log. This
// catches a data dir given to the wrong member (it would campaign as
// someone else) or moved to another cluster (raft ignores -peers once the
// data dir holds state, and would dial the old cluster's addresses for
// ever). A data dir from a jobd without this file is adopted: the file is
// written with the current flags.
//
// The cluster ID is -cluster-id, or derived from -peers (sorted id=address
// pairs; a member without -peers is a cluster of its own). A cluster whose
// member addresses change keeps its data dirs by passing the stored ID with
// -cluster-id.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/jobraft/jobraft/raft"
)

const (
	identityFile    = "jobd-identity.json"
	identityVersion = 1
)

// identity is the content of the identity file:
//
//	{"version": 1, "cluster": "peers-3f2a...", "member": "n1", "peers": "n1=...,n2=..."}
type identity struct {
	Version int    `json:"version"`
	Cluster string `json:"cluster"`
	Member  string `json:"member"`
	// Peers is the -peers of the first start, for messages only.
	Peers string `json:"peers,omitempty"`
}

// validate checks an identity read from disk.
func (id identity) validate() error {
	switch {
	case id.Version != identityVersion:
		return fmt.Errorf("version %d (this jobd reads %d)", id.Version, identityVersion)
	case id.Cluster == "":
		return errors.New("no cluster")
	case id.Member == "":
		return errors.New("no member")
	}
	return nil
}

// clusterID is -cluster-id, or one derived from the initial members (nil:
// this member alone).
func (o *options) clusterID(members []raft.Member) string {
	if o.ClusterID != "" {
		return o.ClusterID
	}
	var parts []string
	for _, m := range members {
		parts = append(parts, m.ID+"="+m.Address)
	}
	if members == nil {
		parts = []string{"alone:" + o.ID}
	}
	sort.Strings(parts)
	sum := sha256.Sum256([]byte(strings.Join(parts, ",")))
	return "peers-" + hex.EncodeToString(sum[:8])
}

// readIdentity reads dir's identity file; a missing file matches
// fs.ErrNotExist.
func readIdentity(dir string) (identity, error) {
	path := filepath.Join(dir, identityFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return identity{}, err
	}
	var id identity
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&id); err != nil {
		return identity{}, fmt.Errorf("%w: %s: %v", errBadIdentity, path, err)
	}
	if err := id.validate(); err != nil {
		return identity{}, fmt.Errorf("%w: %s: %v", errBadIdentity, path, err)
	}
	return id, nil
}

// writeIdentity writes dir's identity file durably (temporary file, fsync,
// rename, fsync of the dir).
func writeIdentity(dir string, id identity) error {
	b, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, identityFile)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("identity file: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("identity file: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("identity file: %w", err)
	}
	defer d.Close()
	return d.Sync()
}

// checkIdentity compares dir's identity with want (this start's), and
// writes want if dir has none yet.
func checkIdentity(dir string, want identity, fromFlag bool) error {
	have, err := readIdentity(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return writeIdentity(dir, want)
	case err != nil:
		return err
	}
	if have.Member != want.Member {
		return fmt.Errorf("%w: %s was created for member %q, not %q (-id): give each member its own data dir",
			errOtherMember, dir, have.Member, want.Member)
	}
	if have.Cluster != want.Cluster {
		how := "derived from -peers " + orNone(want.Peers)
		if fromFlag {
			how = "from -cluster-id"
		}
		return fmt.Errorf("%w: %s was created for cluster %s (-peers %s), and this start is for cluster %s (%s): "+
			"start it with its own cluster's flags or give this member an empty data dir; if it is the same cluster "+
			"with new member addresses, pass -cluster-id %s",
			errOtherCluster, dir, have.Cluster, orNone(have.Peers), want.Cluster, how, have.Cluster)
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
