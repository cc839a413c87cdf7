package chaos

import (
	"os"
	"testing"

	"github.com/jobraft/jobraft/internal/ctltest"
)

func TestMain(m *testing.M) {
	ctltest.MemberMain() // a child member process never returns from it
	os.Exit(m.Run())
}
