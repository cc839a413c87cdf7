package raft_test

import (
	"os"
	"testing"

	"github.com/jobraft/jobraft/internal/proctest"
)

// TestMain lets the test binary run as a member process for the crash tests
// (internal/proctest re-executes it).
func TestMain(m *testing.M) {
	proctest.RunIfChild()
	os.Exit(m.Run())
}
