package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/examples/internal/cluster"
)

// checkBackup takes a backup through the API (GET /v1/cluster/backup, by
// the public client: verified as it is saved), checks it again whole
// (the state rebuilt to its digest), and compares it with the converged
// members: every job, at their applied index, with their state digest
// (the cluster is idle, so nothing was applied since).
func checkBackup(ctx context.Context, cfg config, c *cluster.Cluster, conv []client.Status, sum *summary) {
	const name = "backup (GET /v1/cluster/backup): every job, at the members' index and digest"
	path := filepath.Join(cfg.Dir, "cluster.jrb")
	bctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	m, err := c.Client().BackupToFile(bctx, path)
	if err != nil {
		sum.check(name, false, err.Error())
		return
	}
	took := time.Since(start)
	if _, err := jobraft.VerifyBackup(path); err != nil {
		sum.check(name, false, err.Error())
		return
	}
	ok := m.Jobs == cfg.Jobs && m.Index == conv[0].AppliedIndex && m.StateDigest == conv[0].Digest
	sum.check(name, ok, fmt.Sprintf("%s: %d jobs, index %d, digest %s, %d bytes in %v (members: index %d, digest %s)",
		path, m.Jobs, m.Index, short(m.StateDigest), m.Size, took.Round(time.Millisecond), conv[0].AppliedIndex, short(conv[0].Digest)))
}
