package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobraft/jobraft/examples/client"
	jobdcluster "github.com/jobraft/jobraft/examples/internal/cluster"
)

// TestJoinChecksClusterID: with real jobd processes, a member started with
// -join and another cluster's ID is refused when it is added: 409
// cluster_mismatch naming both IDs, it never enters the configuration and
// never stores an entry; one started with the cluster's own ID joins and
// is promoted.
func TestJoinChecksClusterID(t *testing.T) {
	bin := jobdBinary(t)
	c, err := jobdcluster.New(context.Background(), jobdcluster.Options{Dir: t.TempDir(), Members: 3, Spares: 2,
		Flags: []string{"-workers=false"}}, bin, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for i := range c.Members {
		if err := c.Start(i); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range c.Members {
		waitReadyURL(t, "http://"+m.HTTPAddr, nil, logFile(m.LogPath))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	api := c.Members[1].Client
	ms, err := api.Membership(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const wrong = "peers-wrong"
	if ms.ClusterID == "" || ms.ClusterID == wrong {
		t.Fatalf("cluster ID %q", ms.ClusterID)
	}

	// The wrong cluster ID: refused, naming both.
	bad, good := c.Spares[0], c.Spares[1]
	if err := c.StartSpare(0, wrong); err != nil {
		t.Fatal(err)
	}
	waitListening(t, bad)
	err = api.AddMember(ctx, bad.ID, bad.RaftAddr)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusConflict || ce.Code != "cluster_mismatch" ||
		!strings.Contains(ce.Reason, `"`+wrong+`"`) || !strings.Contains(ce.Reason, `"`+ms.ClusterID+`"`) {
		t.Fatalf("adding a member of cluster %q: %v; want 409 cluster_mismatch naming %q and %q", wrong, err, wrong, ms.ClusterID)
	}
	t.Logf("refused: %s", ce.Reason)
	for _, m := range c.Members {
		st, err := m.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, mm := range st.Members {
			if mm.ID == bad.ID {
				t.Fatalf("%s's configuration names the refused member: %+v", m.ID, st.Members)
			}
		}
	}
	if st, err := bad.Status(ctx); err != nil || st.LastIndex != 0 || len(st.Members) != 0 || st.ClusterID != wrong {
		t.Fatalf("the refused member: %+v, %v; want no entry, no configuration, cluster %q", st.Status, err, wrong)
	}

	// The cluster's own ID: it joins and is promoted.
	if err := c.StartSpare(1, ms.ClusterID); err != nil {
		t.Fatal(err)
	}
	waitListening(t, good)
	if err := api.AddMember(ctx, good.ID, good.RaftAddr); err != nil {
		t.Fatalf("adding a member of the cluster: %v", err)
	}
	for {
		cur, err := api.Membership(ctx)
		if err == nil {
			if m, ok := cur.Find(good.ID); ok && m.Suffrage == "voter" {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s not promoted: %+v %v", good.ID, cur, err)
		case <-time.After(100 * time.Millisecond): // polling the API
		}
	}
	if st, err := good.Status(ctx); err != nil || st.LastIndex == 0 || st.ClusterID != ms.ClusterID {
		t.Fatalf("the joined member: %+v, %v", st.Status, err)
	}
	// The refused one still holds nothing.
	if st, err := bad.Status(ctx); err != nil || st.LastIndex != 0 || len(st.Members) != 0 {
		t.Fatalf("the refused member after the other joined: %+v, %v", st.Status, err)
	}
}

// waitListening waits until m's API answers (it is started, not ready: it
// waits to be added).
func waitListening(t *testing.T, m *jobdcluster.Member) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := m.Status(context.Background()); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer within 30s:\n%s", m.ID, logFile(m.LogPath))
		}
		time.Sleep(50 * time.Millisecond) // polling the API
	}
}
