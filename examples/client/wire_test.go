package client

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// wireGoldens maps each of jobd's golden replies (examples/jobd/testdata/
// wire, recorded by jobd's TestWireFormatGoldens) to the client type that
// defines its shape.
var wireGoldens = map[string]func() any{
	"submit":           func() any { return new(Submitted) },
	"submit_duplicate": func() any { return new(Submitted) },
	"submit_batch":     func() any { return new(BatchReply) },
	"get":              func() any { return new(Job) },
	"get_succeeded":    func() any { return new(Job) },
	"get_retrying":     func() any { return new(Job) },
	"cancel":           func() any { return new(Job) },
	"retry":            func() any { return new(Job) },
	"claim":            func() any { return new(ClaimReply) },
	"list":             func() any { return new(JobPage) },
	"list_page":        func() any { return new(JobPage) },
	"extend":           func() any { return new(Settled) },
	"ack":              func() any { return new(Settled) },
	"nak":              func() any { return new(Settled) },
	"pause":            func() any { return new(QueueState) },
	"resume":           func() any { return new(QueueState) },
	"stats":            func() any { return new(Stats) },
	"error":            func() any { return new(ErrorReply) },
	"status":           func() any { return new(ClusterStatus) },
	"status_self":      func() any { return new(ClusterStatus) },
	"members":          func() any { return new(Membership) },
	"member_add_voter": func() any { return new(MemberAdded) },
	"member_remove":    func() any { return new(MemberRemoved) },
	"watch":            func() any { return new([]Event) },
}

// Every golden reply decodes into its client type with no field unknown
// and encodes back to the same bytes: the client's types are the whole
// wire format, field for field and in jobd's order.
func TestGoldensRoundTrip(t *testing.T) {
	files, err := filepath.Glob("../jobd/testdata/wire/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no goldens in ../jobd/testdata/wire")
	}
	seen := map[string]bool{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		seen[name] = true
		newV := wireGoldens[name]
		if newV == nil {
			t.Errorf("%s: no client type for this golden", name)
			continue
		}
		golden, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := json.Compact(&want, golden); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		v := newV()
		dec := json.NewDecoder(bytes.NewReader(golden))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			t.Errorf("%s: decode into %T: %v", name, v, err)
			continue
		}
		got, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s: %T re-encodes differently:\n got  %s\n want %s", name, v, got, want.Bytes())
		}
	}
	for name := range wireGoldens {
		if !seen[name] {
			t.Errorf("%s: listed, but no golden of that name", name)
		}
	}
}
