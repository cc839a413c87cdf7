package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobraft/jobraft/backup"
	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/examples/internal/cluster"
)

// TestDisasterRecovery is the disaster drill with real processes: a
// workload on a 3-member jobd cluster, a backup (jobctl backup) taken while
// submits keep coming, more work after it, then every member SIGKILLed and
// its data dir deleted. A corrupt copy of the backup is refused by jobd
// restore with a diagnostic and writes nothing; the good one seeds a new
// cluster (jobd restore on each member, a new -cluster-id; the old one is
// refused). The restored members apply the backup's index with its state
// digest; every job acknowledged before the backup began exists, the
// settled ones in the state they had; jobs submitted after the backup
// returned do not exist; and the new cluster takes new work.
func TestDisasterRecovery(t *testing.T) {
	binaries(t)
	base := t.TempDir()
	old, cl := startCluster(t, filepath.Join(base, "old"), []string{"-queues", "work=4", "-lease-ttl", "30s"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// 1. A settled workload: succeeded, dead and canceled jobs.
	var reqs []client.SubmitRequest
	for i := 0; i < 150; i++ {
		kind := "echo"
		if i%10 == 0 {
			kind = "fail"
		}
		reqs = append(reqs, client.SubmitRequest{ID: fmt.Sprintf("settled-%03d", i), Queue: "work", Kind: kind,
			Payload: []byte(fmt.Sprint(i)), MaxAttempts: 1})
	}
	if _, err := cl.SubmitBatch(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Submit(ctx, client.SubmitRequest{ID: "parked", Queue: "parked", Kind: "echo"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Cancel(ctx, "parked", "drill"); err != nil {
		t.Fatal(err)
	}
	settled := waitSettled(t, ctx, cl, "work", 150)

	// 2. Submits keep coming while the backup is taken.
	type ack struct {
		id          string
		begun, done time.Time
	}
	var mu sync.Mutex
	var acks []ack
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			a := ack{id: fmt.Sprintf("live-%04d", i), begun: time.Now()}
			if _, err := cl.Submit(ctx, client.SubmitRequest{ID: a.id, Queue: "live", Kind: "echo"}); err != nil {
				t.Errorf("live submit %s: %v", a.id, err)
				return
			}
			a.done = time.Now()
			mu.Lock()
			acks = append(acks, a)
			mu.Unlock()
		}
	}()
	waitFor(t, "some live submits before the backup", func() bool { mu.Lock(); defer mu.Unlock(); return len(acks) >= 20 })

	file := filepath.Join(base, "cluster.jrb")
	backupBegan := time.Now()
	out, errs, code := jobctl(t, old, "backup", "-o", file, "-json")
	backupEnded := time.Now()
	if code != exitOK {
		t.Fatalf("jobctl backup: exit %d: %s", code, errs)
	}
	var br struct {
		Manifest backup.Manifest `json:"manifest"`
	}
	if err := json.Unmarshal([]byte(out), &br); err != nil {
		t.Fatal(err)
	}
	m := br.Manifest
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("backup: index %d, %d jobs, %d bytes in %v", m.Index, m.Jobs, fi.Size(), backupEnded.Sub(backupBegan))

	// 3. Work after the backup: more submits, a dead job retried.
	waitFor(t, "live submits after the backup", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acks) > 0 && acks[len(acks)-1].begun.After(backupEnded)
	})
	close(stop)
	wg.Wait()
	if _, err := cl.Retry(ctx, "settled-000"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Submit(ctx, client.SubmitRequest{ID: "after-backup", Queue: "work", Kind: "echo"}); err != nil {
		t.Fatal(err)
	}

	// 4. Disaster: every member SIGKILLed, every data dir gone.
	for i, mem := range old.Members {
		if err := old.Kill(i); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(mem.DataDir); err != nil {
			t.Fatal(err)
		}
	}

	// 5. A corrupt backup is refused with a diagnostic; nothing written.
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-len(b)/3] ^= 0x10
	corrupt := filepath.Join(base, "corrupt.jrb")
	if err := os.WriteFile(corrupt, b, 0o600); err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(base, "probe")
	rout, code := jobdRestore(t, "-from", corrupt, "-data", probe, "-id", "n1", "-peers", "n1=127.0.0.1:1", "-cluster-id", "restored")
	if code != 1 || !strings.Contains(rout, "corrupt") || !strings.Contains(rout, "sha256") {
		t.Fatalf("restore of a corrupt backup: exit %d, %q; want exit 1 with the digest mismatch", code, rout)
	}
	if _, err := os.Stat(probe); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("restore of a corrupt backup wrote %s (%v)", probe, err)
	}
	// The old cluster's own ID is refused: a restore is a new cluster.
	rout, code = jobdRestore(t, "-from", file, "-data", probe, "-id", "n1", "-peers", "n1=127.0.0.1:1", "-cluster-id", m.ClusterID)
	if code != 1 || !strings.Contains(rout, "new cluster") {
		t.Fatalf("restore under the old cluster ID: exit %d, %q", code, rout)
	}
	if _, err := os.Stat(probe); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("refused restore wrote %s (%v)", probe, err)
	}

	// 6. A new cluster seeded from the backup (no workers: the state stays
	// as restored while it is checked).
	restoreStart := time.Now()
	var restoreDur time.Duration
	fresh, ncl := startCluster(t, filepath.Join(base, "new"), []string{"-cluster-id", "restored-1", "-workers=false"}, func(c *cluster.Cluster, mem *cluster.Member) {
		out, code := jobdRestore(t, "-from", file, "-data", mem.DataDir, "-id", mem.ID, "-peers", c.Peers(), "-cluster-id", "restored-1")
		if code != 0 {
			t.Fatalf("jobd restore %s: exit %d: %s", mem.ID, code, out)
		}
		restoreDur = time.Since(restoreStart)
	})
	t.Logf("restore: 3 members seeded in %v, cluster ready %v after the first seed", restoreDur, time.Since(restoreStart))
	for _, mem := range fresh.Members {
		st, err := mem.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.DigestIndex != m.Index || st.Digest != m.StateDigest {
			t.Fatalf("member %s: digest %s at %d, backup %s at %d", mem.ID, st.Digest, st.DigestIndex, m.StateDigest, m.Index)
		}
	}
	for id, want := range settled {
		got, err := ncl.Get(ctx, id, client.Linearizable)
		if err != nil {
			t.Fatalf("settled job %s: %v", id, err)
		}
		if got.State != want.State || got.Attempts != want.Attempts || string(got.Result) != string(want.Result) {
			t.Fatalf("settled job %s: %s/%d, want %s/%d (as before the backup)", id, got.State, got.Attempts, want.State, want.Attempts)
		}
	}
	if got, err := ncl.Get(ctx, "parked", client.Linearizable); err != nil || got.State != "canceled" {
		t.Fatalf("parked: %+v %v", got, err)
	}
	before, after := 0, 0
	for _, a := range acks {
		_, err := ncl.Get(ctx, a.id, client.Linearizable)
		switch {
		case a.done.Before(backupBegan) && err != nil:
			t.Fatalf("job %s acknowledged before the backup began: %v", a.id, err)
		case a.done.Before(backupBegan):
			before++
		case a.begun.After(backupEnded) && !errors.Is(err, client.ErrNotFound):
			t.Fatalf("job %s submitted after the backup: %v, want not found", a.id, err)
		case a.begun.After(backupEnded):
			after++
		}
	}
	if _, err := ncl.Get(ctx, "after-backup", client.Linearizable); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("after-backup: %v, want not found", err)
	}
	t.Logf("live jobs: %d acknowledged before the backup (all present), %d begun after it (all absent)", before, after)
	if before == 0 || after == 0 {
		t.Fatalf("the drill needs jobs on both sides of the backup: %d before, %d after", before, after)
	}
	// 7. The new cluster takes new work.
	if r, err := ncl.Submit(ctx, client.SubmitRequest{ID: "reborn", Queue: "work", Kind: "echo"}); err != nil || r.Duplicate {
		t.Fatalf("submit on the restored cluster: %+v %v", r, err)
	}
}

// jobdRestore runs jobd restore and returns its combined output and exit
// status.
func jobdRestore(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(jobdBin, append([]string{"restore"}, args...)...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return string(out), 0
}

// waitSettled waits until n jobs of queue are finished and returns them
// by ID.
func waitSettled(t *testing.T, ctx context.Context, cl *client.Client, queue string, n int) map[string]client.Job {
	t.Helper()
	var out map[string]client.Job
	waitFor(t, "the workload settles", func() bool {
		jobs, err := cl.ListAll(ctx, queue, "")
		if err != nil {
			return false
		}
		out = map[string]client.Job{}
		for _, j := range jobs {
			if j.State != "succeeded" && j.State != "dead" && j.State != "canceled" {
				return false
			}
			out[j.ID] = j
		}
		return len(out) == n
	})
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(50 * time.Millisecond) // polling the API
	}
}
