package chaos

import (
	"testing"

	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// TestMain lets the test binary run as a member process (a child member
// process never returns from clustertest.Main).
func TestMain(m *testing.M) { clustertest.Main(m) }
