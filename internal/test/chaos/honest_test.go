package chaos

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/internal/test/history"
)

// honest (a): a member that never lied applies one entry per index across
// its restarts; after a lie, an earlier run's entry above the floor its
// log restarted with is not protected (it may be one the cluster lost).
func TestHonestOneHistoryAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	f, err := history.OpenFile("p0", filepath.Join(dir, history.FileName), func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	applied := func(ix, term uint64, crc uint32) history.Record {
		return history.Record{Kind: history.KindApplied, Index: ix, Term: term, Type: raft.LogCommand, CRC: crc}
	}
	f.Append([]history.Record{{Kind: history.KindStarted}, applied(1, 1, 0xa), applied(2, 1, 0xb)})
	f.Append([]history.Record{{Kind: history.KindStarted}, applied(1, 1, 0xa), applied(2, 2, 0xc)})
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		lie   bool
		floor uint64
		ok    bool
	}{
		{"no lie: strict across restarts", false, 2, false},
		{"a lie, restarted with floor 1: index 2 unprotected", true, 1, true},
		{"a lie, restarted with floor 2: index 2 protected", true, 2, false},
	} {
		r := &runner{s: Schedule{Members: 1}, p: &clustertest.CtlProcs{Cfgs: []clustertest.MemberConfig{{ID: "p0", DataDir: dir}}},
			lied: []bool{false}, restartFloors: []map[int]uint64{{1: c.floor}}, finalLead: -1}
		if c.lie {
			r.lies = []lieSpan{{member: 1}}
		}
		v := r.honest()
		if v.OK != c.ok || (!v.OK && !strings.Contains(v.Detail, "two entries at index 2")) {
			t.Errorf("%s: %v, want ok=%v", c.name, v, c.ok)
		}
	}
}
