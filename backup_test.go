package jobraft_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/backup"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
)

// TestBackupRestoreNewCluster: a backup taken on a follower holds every job
// acknowledged before it began; a new 3-member cluster seeded from it (new
// data dirs, new addresses) applies the backup's index with the backup's
// state digest on every member, has every job with its state, and keeps
// working (a submit after the restore commits).
func TestBackupRestoreNewCluster(t *testing.T) {
	c := clustertest.StartCtls(t, 3, nil)
	leader := c.WaitLeader(10 * time.Second)
	ctx := clustertest.Ctx(t, 60*time.Second)
	var acked []jobraft.Job
	for i := 0; i < 50; i++ {
		j, err := c.Ctls[leader].Submit(ctx, jobraft.SubmitRequest{ID: fmt.Sprintf("j%03d", i), Queue: "q", Kind: "k", Payload: []byte{byte(i)}})
		if err != nil {
			t.Fatal(err)
		}
		j.Job.Payload = []byte{byte(i)} // what was submitted
		acked = append(acked, j.Job)
	}
	if _, err := c.Ctls[leader].Cancel(ctx, "j007", "test"); err != nil {
		t.Fatal(err)
	}
	f := (leader + 1) % 3
	var buf bytes.Buffer
	m, err := c.Ctls[f].Backup(ctx, &buf, jobraft.BackupOptions{ClusterID: "old"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Jobs != 50 || m.ClusterID != "old" || m.Member != c.Cfgs[f].ID {
		t.Fatalf("manifest %+v", m)
	}
	path := filepath.Join(t.TempDir(), "b.jrb")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	// Work after the backup is not in it.
	if _, err := c.Ctls[leader].Submit(ctx, jobraft.SubmitRequest{ID: "after", Queue: "q", Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	c.Close()

	base := t.TempDir()
	var cfgs []jobraft.Config
	var members []raft.Member
	for i := 0; i < 3; i++ {
		id := fmt.Sprintf("r%d", i)
		cfg := clustertest.CtlConfig(t, id, filepath.Join(base, id), clustertest.FreeAddr(t))
		cfgs = append(cfgs, cfg)
		members = append(members, raft.Member{ID: id, Address: cfg.BindAddr, Voter: true})
	}
	for i := range cfgs {
		rm, err := jobraft.Restore(path, cfgs[i].DataDir, members)
		if err != nil {
			t.Fatal(err)
		}
		if rm.StateDigest != m.StateDigest {
			t.Fatalf("restore manifest digest %s, backup %s", rm.StateDigest, m.StateDigest)
		}
	}
	var ctls []*jobraft.Controller
	for i := range cfgs {
		ctl, err := jobraft.Open(context.Background(), cfgs[i])
		if err != nil {
			t.Fatal(err)
		}
		ctls = append(ctls, ctl)
		defer ctl.Close(context.Background())
	}
	for i, ctl := range ctls {
		d := ctl.Node().Status().Digest
		if d.Index != m.Index || fmt.Sprintf("%x", d.Sum) != m.StateDigest {
			t.Fatalf("member %d: digest %d/%x, backup %d/%s", i, d.Index, d.Sum, m.Index, m.StateDigest)
		}
	}
	for _, want := range acked {
		got, err := ctls[0].Get(ctx, want.ID, jobraft.Linearizable)
		if err != nil {
			t.Fatalf("%s: %v", want.ID, err)
		}
		wantState := jobraft.StatePending
		if want.ID == "j007" {
			wantState = jobraft.StateCanceled
		}
		if got.State != wantState || !bytes.Equal(got.Payload, want.Payload) {
			t.Fatalf("%s: state %v payload %x, want %v %x", want.ID, got.State, got.Payload, wantState, want.Payload)
		}
	}
	if _, err := ctls[0].Get(ctx, "after", jobraft.Linearizable); !errors.Is(err, jobraft.ErrNotFound) {
		t.Fatalf("job submitted after the backup: %v, want ErrNotFound", err)
	}
	j, err := ctls[1].Submit(ctx, jobraft.SubmitRequest{ID: "new", Queue: "q", Kind: "k"})
	if err != nil || j.Duplicate {
		t.Fatalf("submit on the restored cluster: %+v %v", j, err)
	}
	clustertest.WaitFor(t, 20*time.Second, "every restored member applies the new job", func() bool {
		for _, ctl := range ctls {
			if _, err := ctl.Get(ctx, "new", jobraft.Local); err != nil {
				return false
			}
		}
		return true
	})
}

// TestRestoreRefusesCorruptBackup: a backup with one flipped byte anywhere
// (header, manifest, artifact), truncated, or with a trailing byte is
// refused with backup.ErrCorrupt and the data dir is not created.
func TestRestoreRefusesCorruptBackup(t *testing.T) {
	c := clustertest.StartCtls(t, 1, nil)
	c.WaitLeader(10 * time.Second)
	ctx := clustertest.Ctx(t, 30*time.Second)
	for i := 0; i < 20; i++ {
		if _, err := c.Ctls[0].Submit(ctx, jobraft.SubmitRequest{ID: fmt.Sprintf("j%d", i), Queue: "q", Kind: "k", Payload: []byte("p")}); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := c.Ctls[0].Backup(ctx, &buf, jobraft.BackupOptions{}); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	dir := t.TempDir()
	members := []raft.Member{{ID: "x", Address: "127.0.0.1:1", Voter: true}}
	cases := map[string][]byte{
		"truncated": good[:len(good)-1],
		"trailing":  append(bytes.Clone(good), 0),
		"empty":     nil,
	}
	for _, off := range []int{3, 17, 25, len(good) / 2, len(good) - 40, len(good) - 2} {
		b := bytes.Clone(good)
		b[off] ^= 0x40
		cases[fmt.Sprintf("flip@%d", off)] = b
	}
	for name, b := range cases {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		data := filepath.Join(dir, name+".data")
		_, err := jobraft.Restore(path, data, members)
		if !errors.Is(err, backup.ErrCorrupt) {
			t.Errorf("%s: %v, want backup.ErrCorrupt", name, err)
		}
		if _, serr := os.Stat(data); !errors.Is(serr, os.ErrNotExist) {
			t.Errorf("%s: data dir written (%v)", name, serr)
		}
		t.Logf("%s: %v", name, err)
	}
	// The good one restores.
	path := filepath.Join(dir, "good")
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := jobraft.Restore(path, filepath.Join(dir, "good.data"), members); err != nil {
		t.Fatal(err)
	}
	if _, err := jobraft.Restore(path, filepath.Join(dir, "good.data"), members); !errors.Is(err, raft.ErrSeedExisting) {
		t.Fatalf("restore over a seeded data dir: %v, want raft.ErrSeedExisting", err)
	}
}
