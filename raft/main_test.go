package raft_test

import (
	"testing"

	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// TestMain lets the test binary run as a member process for the crash tests
// (internal/test/clustertest re-executes it).
func TestMain(m *testing.M) { clustertest.Main(m) }
