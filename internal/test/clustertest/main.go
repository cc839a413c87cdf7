package clustertest

import (
	"os"
	"testing"
)

// Main is the TestMain of a package whose tests run members as child
// processes: in a child started by NodeProcs or CtlProcs (the test binary
// re-executed) it runs the member and never returns; otherwise it runs the
// tests.
func Main(m *testing.M) {
	RunIfChild()
	os.Exit(m.Run())
}

// RunIfChild runs the member and exits when the process is a child
// member (EnvNode or EnvCtl is set); otherwise it returns at once. Main
// calls it first.
func RunIfChild() {
	runNodeChild()
	runCtlChild()
}
