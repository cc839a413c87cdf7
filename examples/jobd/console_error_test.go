package main

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/raft"
)

// TestConsoleErrorNamesLeaderByIDAndAddress: the console's error page names
// the leader as the API's replies do, "ID (address)", whichever of the two
// the error carried.
func TestConsoleErrorNamesLeaderByIDAndAddress(t *testing.T) {
	d, _ := startTest(t, nil)
	st := d.ctl.Node().Status()
	s := newServer(d.ctl, st.ID, testToken, defaults(), newMetrics(), hclog.NewNullLogger(), nil)
	c := newConsole(s)
	for _, leader := range []string{st.ID, st.Address} {
		err := fmt.Errorf("%w: %w", jobraft.ErrOutcomeUnknown,
			&raft.ProposeError{Class: raft.ErrIndeterminate, Leader: leader, Cause: io.EOF})
		rec := httptest.NewRecorder()
		c.fail(rec, &page{}, err)
		body := rec.Body.String()
		want := fmt.Sprintf("(leader %s (%s))", st.ID, st.Address)
		if !strings.Contains(body, want) {
			t.Errorf("leader %q: the error page does not name it %s:\n%s", leader, want, body)
		}
	}
}
