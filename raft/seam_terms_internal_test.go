package raft

import "testing"

func TestDecidePastFloor(t *testing.T) {
	for _, c := range []struct {
		name string
		v    pastView
		want pastVerdict
	}{
		{"floor 0: nothing committed", pastView{}, pastVerified},
		{"floor 0, sender unreachable", pastView{Floor: 0, Asked: false}, pastVerified},
		{"same term", pastView{Floor: 9, Asked: true, Own: 3, Sender: 3, OwnKnown: true, SenderKnown: true}, pastVerified},
		{"another term", pastView{Floor: 9, Asked: true, Own: 2, Sender: 3, OwnKnown: true, SenderKnown: true}, pastDiverged},
		{"another term, lower", pastView{Floor: 9, Asked: true, Own: 4, Sender: 3, OwnKnown: true, SenderKnown: true}, pastDiverged},
		{"own term unknown", pastView{Floor: 9, Asked: true, Sender: 3, SenderKnown: true}, pastUnverified},
		{"sender's term unknown", pastView{Floor: 9, Asked: true, Own: 3, OwnKnown: true}, pastUnverified},
		{"sender without jr.terms", pastView{Floor: 9, Old: true, Own: 3, OwnKnown: true}, pastUnverified},
		{"sender unreachable", pastView{Floor: 9, Own: 3, OwnKnown: true}, pastRetry},
	} {
		if got := decidePastFloor(c.v); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
