package raft

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestRaftLoggerQuietUnlessHostDebugs: under a host logger at Info,
// hashicorp/raft's Info lines and routine warnings are dropped and its
// other warnings kept; under a host logger at Debug every line passes.
func TestRaftLoggerQuietUnlessHostDebugs(t *testing.T) {
	for _, tc := range []struct {
		level hclog.Level
		want  []string
		drop  []string
	}{
		{hclog.Info, []string{"failed to contact"}, []string{"entering follower state", "heartbeat timeout reached, starting election"}},
		{hclog.Debug, []string{"failed to contact", "entering follower state", "heartbeat timeout reached, starting election"}, nil},
	} {
		var buf bytes.Buffer
		host := hclog.New(&hclog.LoggerOptions{Level: tc.level, Output: &buf})
		l := raftLogger(host.Named("raft"), host).With("member", "n1")
		l.Info("entering follower state")
		l.Warn("heartbeat timeout reached, starting election")
		l.Warn("failed to contact")
		for _, w := range tc.want {
			if !strings.Contains(buf.String(), w) {
				t.Errorf("host at %v: %q not logged:\n%s", tc.level, w, buf.String())
			}
		}
		for _, d := range tc.drop {
			if strings.Contains(buf.String(), d) {
				t.Errorf("host at %v: %q logged:\n%s", tc.level, d, buf.String())
			}
		}
		if tc.level == hclog.Info && l.IsInfo() {
			t.Errorf("host at Info: raft's logger says IsInfo")
		}
	}
}
