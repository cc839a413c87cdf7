package jobraft_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
)

var backupJobsFlag = flag.Int("jobraft.backupjobs", 0, "TestBackupLarge: jobs in the measured backup (0: skip), e.g. 1000000")

// TestBackupLarge measures a backup of a large state and its restore: a
// 3-member cluster holding -jobraft.backupjobs jobs (64-byte payloads), a
// backup to a file (size, time), then Restore of three new data dirs
// (check and seed, time) and the restored members' start until they agree
// on the backup's digest. Run: go test -run TestBackupLarge -jobraft.backupjobs=1000000 -timeout 60m .
func TestBackupLarge(t *testing.T) {
	n := *backupJobsFlag
	if n == 0 {
		t.Skip("measurement: set -jobraft.backupjobs=N")
	}
	c := clustertest.StartCtls(t, 3, func(i int, cfg *jobraft.Config) { cfg.ProposeTimeout = 30 * time.Second })
	leader := c.WaitLeader(10 * time.Second)
	ctx := clustertest.Ctx(t, 50*time.Minute)
	fill := time.Now()
	payload := make([]byte, 64)
	const batch = 1000
	for i := 0; i < n; i += batch {
		reqs := make([]jobraft.SubmitRequest, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			reqs = append(reqs, jobraft.SubmitRequest{ID: fmt.Sprintf("job-%08d", j), Queue: "q", Kind: "k", Payload: payload})
		}
		if _, err := c.Ctls[leader].SubmitBatch(ctx, reqs); err != nil {
			t.Fatalf("fill at %d: %v", i, err)
		}
	}
	t.Logf("filled %d jobs in %v", n, time.Since(fill))

	dir := t.TempDir()
	path := filepath.Join(dir, "big.jrb")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	m, err := c.Ctls[leader].Backup(ctx, f, jobraft.BackupOptions{TempDir: dir})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	backupDur := time.Since(start)
	fi, _ := os.Stat(path)
	if m.Jobs != n {
		t.Fatalf("backup holds %d jobs, want %d", m.Jobs, n)
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
	start = time.Now()
	if _, err := jobraft.Restore(path, cfgs[0].DataDir, members); err != nil {
		t.Fatal(err)
	}
	oneRestore := time.Since(start)
	for i := 1; i < 3; i++ {
		if _, err := jobraft.Restore(path, cfgs[i].DataDir, members); err != nil {
			t.Fatal(err)
		}
	}
	start = time.Now()
	for i := range cfgs {
		ctl, err := jobraft.Open(context.Background(), cfgs[i])
		if err != nil {
			t.Fatal(err)
		}
		defer ctl.Close(context.Background())
		if d := ctl.Node().Status().Digest; d.Index != m.Index || fmt.Sprintf("%x", d.Sum) != m.StateDigest {
			t.Fatalf("member %s: digest %d/%x, backup %d/%s", cfgs[i].ID, d.Index, d.Sum, m.Index, m.StateDigest)
		}
	}
	openDur := time.Since(start)
	t.Logf("backup of %d jobs: %d bytes (%.1f MiB) in %v; restore of one member (check whole + seed) %v; 3 members opened with the backup's digest in %v",
		n, fi.Size(), float64(fi.Size())/(1<<20), backupDur.Round(time.Millisecond), oneRestore.Round(time.Millisecond), openDur.Round(time.Millisecond))
}
