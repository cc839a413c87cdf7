package logdigest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/logdigest"
)

// golden reads testdata/wire.golden: per case its request and reply.
func golden(t *testing.T) map[string][2]string {
	t.Helper()
	f, err := os.Open("testdata/wire.golden")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][2]string{}
	var name string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#") || line == "":
		case strings.HasPrefix(line, "== "):
			name = line[3:]
		case strings.HasPrefix(line, "> "):
			c := out[name]
			c[0] = line[2:]
			out[name] = c
		case strings.HasPrefix(line, "< "):
			c := out[name]
			c[1] = line[2:]
			out[name] = c
		default:
			t.Fatalf("golden: bad line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWireGolden: every reply Serve gives is byte-identical to the one the
// protocol's previous home (walcompare.ServeDigest) gave for the same
// request and store, recorded in testdata/wire.golden.
func TestWireGolden(t *testing.T) {
	want := golden(t)
	if len(want) != len(wireCases) {
		t.Fatalf("golden holds %d cases, the test %d", len(want), len(wireCases))
	}
	for _, c := range wireCases {
		g, ok := want[c.name]
		if !ok {
			t.Fatalf("%s: not in the golden file", c.name)
		}
		if g[0] != c.req {
			t.Fatalf("%s: request %s, golden %s", c.name, c.req, g[0])
		}
		out, err := serveCase(logdigest.Serve, c)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if string(out) != g[1] {
			t.Errorf("%s: reply differs from the golden one\n got: %s\nwant: %s", c.name, out, g[1])
		}
	}
}

// The wire types as walcompare declared them before logdigest: a client
// built then decodes replies into these.
type (
	oldView struct {
		Class    string       `json:"class"`
		Present  bool         `json:"present"`
		Term     uint64       `json:"term,omitempty"`
		Type     raft.LogType `json:"type"`
		Len      uint32       `json:"len"`
		CRC      uint32       `json:"crc"`
		Stamped  bool         `json:"stamped,omitempty"`
		StampLen uint32       `json:"stamp_len,omitempty"`
		StampCRC uint32       `json:"stamp_crc,omitempty"`
		Corrupt  bool         `json:"corrupt,omitempty"`
		Detail   string       `json:"detail,omitempty"`
	}
	oldDigest struct {
		From  uint64    `json:"from"`
		To    uint64    `json:"to"`
		Count uint64    `json:"count"`
		Bad   uint64    `json:"bad"`
		Sum   [2]uint64 `json:"sum"`
	}
	oldRequest struct {
		Op    string `json:"op"`
		From  uint64 `json:"from,omitempty"`
		To    uint64 `json:"to,omitempty"`
		Parts int    `json:"parts,omitempty"`
	}
	oldWireEntry struct {
		Index uint64 `json:"i"`
		oldView
	}
	oldReply struct {
		First    uint64         `json:"first"`
		Last     uint64         `json:"last"`
		Floor    uint64         `json:"floor"`
		HasFloor bool           `json:"has_floor"`
		Digests  []oldDigest    `json:"digests,omitempty"`
		Entries  []oldWireEntry `json:"entries,omitempty"`
	}
)

// TestWireOldShape: a reply Serve gives decodes into the old client's
// types and re-encodes from them to the same bytes (an old walcompare reads
// a new member), and the new Reply decodes and re-encodes it unchanged (a
// new walcompare reads an old member); requests encode as before.
func TestWireOldShape(t *testing.T) {
	for _, c := range wireCases {
		out, err := serveCase(logdigest.Serve, c)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var old oldReply
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&old); err != nil {
			t.Fatalf("%s: old shape: %v", c.name, err)
		}
		again, err := json.Marshal(old)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, out) {
			t.Errorf("%s: old shape re-encodes differently\n new: %s\n old: %s", c.name, out, again)
		}
		var rep logdigest.Reply
		if err := json.Unmarshal(again, &rep); err != nil {
			t.Fatalf("%s: new shape: %v", c.name, err)
		}
		back, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back, again) {
			t.Errorf("%s: new shape round trip differs\n got: %s\nwant: %s", c.name, back, again)
		}
	}
	for _, q := range []logdigest.Request{
		{Op: logdigest.OpInfo},
		{Op: logdigest.OpDigests, From: 1, To: 1 << 40, Parts: logdigest.MaxParts},
		{Op: logdigest.OpEntries, From: 7, To: 7},
		{Op: logdigest.OpEntries, To: 3},
	} {
		a, _ := json.Marshal(q)
		b, _ := json.Marshal(oldRequest{Op: q.Op, From: q.From, To: q.To, Parts: q.Parts})
		if !bytes.Equal(a, b) {
			t.Errorf("request %+v: %s, old %s", q, a, b)
		}
	}
}

// countingStore counts the reads of a store.
type countingStore struct {
	raft.LogStore
	reads int
}

func (s *countingStore) FirstIndex() (uint64, error) { s.reads++; return s.LogStore.FirstIndex() }
func (s *countingStore) LastIndex() (uint64, error)  { s.reads++; return s.LogStore.LastIndex() }
func (s *countingStore) GetLog(ix uint64, l *raft.Log) error {
	s.reads++
	return s.LogStore.GetLog(ix, l)
}

// TestServeRefusesBadInput: a malformed or out-of-limits request is refused
// with its sentinel before the store is read.
func TestServeRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		req  string
		want error
	}{
		{`not json`, logdigest.ErrBadRequest},
		{`{"op":"digests","from":1,"to":2}`, logdigest.ErrBadRequest},
		{`{"op":"digests","from":1,"to":2,"parts":-1}`, logdigest.ErrBadRequest},
		{`{"op":"digests","from":1,"to":2,"parts":1025}`, logdigest.ErrBadRequest},
		{`{"op":"digests","from":3,"to":2,"parts":1}`, logdigest.ErrBadRequest},
		{`{"op":"entries","from":3,"to":2}`, logdigest.ErrBadRequest},
		{`{"op":"entries","from":1,"to":4097}`, logdigest.ErrBadRequest},
		{`{"op":"entries","from":0,"to":18446744073709551615}`, logdigest.ErrBadRequest},
		{`{"op":"compact"}`, logdigest.ErrUnknownOp},
		{`{}`, logdigest.ErrUnknownOp},
	} {
		s := &countingStore{LogStore: newFixture()}
		out, err := logdigest.Serve(context.Background(), s, nil, []byte(c.req))
		if !errors.Is(err, c.want) || out != nil || s.reads != 0 {
			t.Errorf("%s: reply %q err %v (want %v), %d store reads", c.req, out, err, c.want, s.reads)
		}
	}
	// The largest entries request is accepted.
	if _, err := logdigest.Serve(context.Background(), newFixture(), nil, []byte(`{"op":"entries","from":1,"to":4096}`)); err != nil {
		t.Fatal(err)
	}
}

// TestServeWholeIndexSpace: a digest of [0, MaxUint64] is answered (the
// range's size, 2^64, does not fit a uint64; it once divided by zero).
func TestServeWholeIndexSpace(t *testing.T) {
	whole, err := serveCase(logdigest.Serve, wireCase{req: `{"op":"digests","from":1,"to":12,"parts":1}`})
	if err != nil {
		t.Fatal(err)
	}
	var w logdigest.Reply
	if err := json.Unmarshal(whole, &w); err != nil {
		t.Fatal(err)
	}
	for _, parts := range []int{1, 2, 3, logdigest.MaxParts} {
		out, err := serveCase(logdigest.Serve, wireCase{req: `{"op":"digests","from":0,"to":18446744073709551615,"parts":` + itoa(parts) + `}`})
		if err != nil {
			t.Fatalf("%d parts: %v", parts, err)
		}
		var rep logdigest.Reply
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Digests) != parts || rep.Digests[0].From != 0 || rep.Digests[parts-1].To != math.MaxUint64 {
			t.Fatalf("%d parts: %d digests %+v", parts, len(rep.Digests), rep.Digests[:min(3, len(rep.Digests))])
		}
		if got := sumDigests(rep.Digests); got.Count != w.Digests[0].Count || got.Bad != w.Digests[0].Bad || got.Sum != w.Digests[0].Sum {
			t.Fatalf("%d parts: sum %+v, want %+v", parts, got, w.Digests[0])
		}
	}
}
