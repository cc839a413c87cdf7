package raft_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/jobraft/jobraft/raft"
)

// Seed refuses what cannot make a new member and writes nothing then.
func TestSeedRefusals(t *testing.T) {
	voter := []raft.Member{{ID: "a", Address: "127.0.0.1:1", Voter: true}}
	cases := map[string]struct {
		members []raft.Member
		index   uint64
	}{
		"no members":    {nil, 5},
		"index 0":       {voter, 0},
		"no voter":      {[]raft.Member{{ID: "a", Address: "127.0.0.1:1"}}, 5},
		"ID twice":      {[]raft.Member{voter[0], {ID: "a", Address: "127.0.0.1:2", Voter: true}}, 5},
		"address twice": {[]raft.Member{voter[0], {ID: "b", Address: "127.0.0.1:1", Voter: true}}, 5},
		"no address":    {[]raft.Member{{ID: "a", Voter: true}}, 5},
	}
	for name, tc := range cases {
		dir := filepath.Join(t.TempDir(), "d")
		err := raft.Seed(dir, tc.members, tc.index, bytes.NewReader([]byte("x")))
		if !errors.Is(err, raft.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
		if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
			t.Errorf("%s: wrote %s", name, dir)
		}
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "log"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := raft.Seed(dir, voter, 5, bytes.NewReader([]byte("x"))); !errors.Is(err, raft.ErrSeedExisting) {
		t.Fatalf("seed over a log: %v, want ErrSeedExisting", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "snapshots")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("seed over a log created snapshots/")
	}
}
