package raft

import "testing"

// TestSeamDecideInstall is the seam's rule for InstallSnapshot
// (decideInstall, docs/upstream.md U2) as a table: the member is at commit
// floor 13 in term 5 unless a row says otherwise.
func TestSeamDecideInstall(t *testing.T) {
	base := installView{ReqTerm: 5, CurTerm: 5, Floor: 13}
	for _, tc := range []struct {
		name string
		edit func(v *installView)
		want installAction
	}{
		{"past the floor, not held: raft installs", func(v *installView) { v.Index, v.Term = 20, 5 }, installPass},
		{"past the floor over a divergent uncommitted entry: raft installs", func(v *installView) { v.Index, v.Term, v.HeldTerm = 20, 5, 4 }, installPass},
		{"past the floor, the log holds it: Figure 13 step 6", func(v *installView) { v.Index, v.Term, v.HeldTerm, v.InLog = 20, 5, 5, true }, installAnswer},
		{"past the floor, held, higher term", func(v *installView) {
			v.Index, v.Term, v.HeldTerm, v.InLog, v.ReqTerm = 20, 5, 5, true, 6
		}, installDefer},
		{"below the floor, in the log", func(v *installView) { v.Index, v.Term, v.HeldTerm, v.InLog = 8, 3, 3, true }, installAnswer},
		{"at the floor, raft's last entry (its snapshot)", func(v *installView) { v.Index, v.Term, v.HeldTerm, v.IsLast = 13, 4, 4, true }, installAnswer},
		{"below the floor, higher term: not adopted here", func(v *installView) { v.Index, v.Term, v.HeldTerm, v.InLog, v.ReqTerm = 8, 3, 3, true, 7 }, installDefer},
		{"below the floor, lower term: raft refuses it", func(v *installView) { v.Index, v.Term, v.InLog, v.ReqTerm = 8, 3, true, 4 }, installPass},
		{"below the floor, another term in the log", func(v *installView) { v.Index, v.Term, v.HeldTerm = 8, 4, 3 }, installDiverged},
		{"below the floor, another term in the snapshot", func(v *installView) { v.Index, v.Term, v.HeldTerm = 13, 5, 4 }, installDiverged},
		{"below the floor, another term, lower request term", func(v *installView) { v.Index, v.Term, v.HeldTerm, v.ReqTerm = 8, 4, 3, 2 }, installDiverged},
		{"below the floor, compacted (term unknown): behind", func(v *installView) { v.Index, v.Term = 8, 3 }, installBehind},
		{"below the floor, compacted, higher term", func(v *installView) { v.Index, v.Term, v.ReqTerm = 8, 3, 6 }, installDefer},
		{"held at raft's last entry but raft's last is stale: behind", func(v *installView) { v.Index, v.Term, v.HeldTerm = 13, 4, 0 }, installBehind},
	} {
		v := base
		tc.edit(&v)
		if got := decideInstall(v); got != tc.want {
			t.Errorf("%s: %+v: got %v, want %v", tc.name, v, got, tc.want)
		}
	}
}
