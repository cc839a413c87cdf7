package fsm

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"
)

func mustEncode(t *testing.T, c Command) []byte {
	t.Helper()
	b, err := EncodeCommand(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func applyDecoded(t *testing.T, m *Jobs, index uint64, cmd []byte) Result {
	t.Helper()
	r, err := DecodeResult(m.Apply(Entry{Index: index, Term: 1, Time: baseTime, Cmd: cmd}))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// One batch entry applies its commands in order, as if each were an entry
// of its own at the batch's index: claims of several workers get distinct
// jobs best first, all under the entry's index as token; an ack in the same
// entry ends one of those leases; its repeat answers unchanged, while an
// ack of that lease with another result is refused stale; a stale nak is
// refused alone, without refusing the others.
func TestBatchAppliesInOrder(t *testing.T) {
	m := New()
	jobs := []NewJob{{ID: "lo", Queue: "q", Kind: "k"}, {ID: "hi", Queue: "q", Kind: "k", Priority: 9}, {ID: "mid", Queue: "q", Kind: "k", Priority: 5}}
	if r := applyDecoded(t, m, 1, mustEncode(t, &SubmitCmd{Jobs: jobs})); r.Err() != nil {
		t.Fatal(r.Err())
	}
	batch := &BatchCmd{Cmds: []Command{
		&ClaimCmd{Queues: []string{"q"}, Worker: "w1", Max: 1, TTL: time.Minute},
		&ClaimCmd{Queues: []string{"q"}, Worker: "w2", Max: 1, TTL: time.Minute},
		&AckCmd{ID: "hi", Token: 2, Result: []byte("ok")},
		&AckCmd{ID: "hi", Token: 2, Result: []byte("ok")},
		&AckCmd{ID: "hi", Token: 2, Result: []byte("other")},
		&NakCmd{ID: "mid", Token: 1, Error: "stale"},
		&ClaimCmd{Queues: []string{"q"}, Worker: "w3", Max: 5, TTL: time.Minute},
	}}
	r := applyDecoded(t, m, 2, mustEncode(t, batch))
	if r.Err() != nil || r.Command != CmdBatch || len(r.Batch) != len(batch.Cmds) {
		t.Fatalf("batch result: %+v", r)
	}
	want := []struct {
		cmd     CommandType
		err     error
		jobs    []string
		changed bool
	}{
		{CmdClaim, nil, []string{"hi"}, true},
		{CmdClaim, nil, []string{"mid"}, true},
		{CmdAck, nil, []string{"hi"}, true},
		{CmdAck, nil, []string{"hi"}, false},
		{CmdAck, ErrStaleLease, nil, false},
		{CmdNak, ErrStaleLease, nil, false},
		{CmdClaim, nil, []string{"lo"}, true},
	}
	for i, w := range want {
		sr := r.Batch[i]
		var ids []string
		for _, j := range sr.Jobs {
			ids = append(ids, j.ID)
			if sr.Command == CmdClaim && (j.Lease == nil || j.Lease.Token != 2) {
				t.Fatalf("command %d: lease %+v, want token 2 (the entry index)", i, j.Lease)
			}
		}
		if sr.Command != w.cmd || sr.Index != 2 || !errors.Is(sr.Err(), w.err) || (w.err == nil && sr.Err() != nil) ||
			!reflect.DeepEqual(ids, w.jobs) || sr.Changed != w.changed {
			t.Fatalf("command %d: %s index %d err %v jobs %v changed %v; want %+v", i, sr.Command, sr.Index, sr.Err(), ids, sr.Changed, w)
		}
	}
	if j, _ := m.Get("hi"); j.State != StateSucceeded || string(j.Result) != "ok" {
		t.Fatalf("hi: %s %q, want succeeded with the first ack's result", j.State, j.Result)
	}
	if j, _ := m.Get("mid"); j.State != StateRunning || j.Lease.Worker != "w2" {
		t.Fatalf("mid: %s %+v, want running for w2 (the stale nak changed nothing)", j.State, j.Lease)
	}
}

// A batch is deterministic and survives a snapshot: two instances applying
// the same entries agree, and a restored copy of one agrees too.
func TestBatchDeterministic(t *testing.T) {
	var a, b = New(), New()
	var jobs []NewJob
	for i := 0; i < 50; i++ {
		jobs = append(jobs, NewJob{ID: "j" + string(rune('A'+i)), Queue: "q", Kind: "k", Priority: int32(i % 4)})
	}
	entries := [][]byte{mustEncode(t, &SubmitCmd{Jobs: jobs})}
	var claims []Command
	for w := 0; w < 20; w++ {
		claims = append(claims, &ClaimCmd{Queues: []string{"q"}, Worker: "w" + string(rune('a'+w)), Max: 2, TTL: time.Minute})
	}
	entries = append(entries, mustEncode(t, &BatchCmd{Cmds: claims}))
	var granted Result
	for i, e := range entries {
		ra := a.Apply(Entry{Index: uint64(i + 1), Term: 1, Time: baseTime, Cmd: e})
		rb := b.Apply(Entry{Index: uint64(i + 1), Term: 1, Time: baseTime, Cmd: e})
		if !bytes.Equal(ra, rb) {
			t.Fatalf("entry %d: results differ", i+1)
		}
		granted, _ = DecodeResult(ra)
	}
	// Ack half the leases the batch granted, in one batch.
	var acks []Command
	for _, sr := range granted.Batch {
		acks = append(acks, &AckCmd{ID: sr.Jobs[0].ID, Token: sr.Jobs[0].Lease.Token})
	}
	ack := mustEncode(t, &BatchCmd{Cmds: acks})
	a.Apply(Entry{Index: 3, Term: 1, Time: baseTime, Cmd: ack})
	b.Apply(Entry{Index: 3, Term: 1, Time: baseTime, Cmd: ack})
	if a.Digest() != b.Digest() {
		t.Fatal("digests differ after the same entries")
	}
	sn, err := a.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := sn.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	c := New()
	if err := c.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if c.Digest() != a.Digest() {
		t.Fatal("restored digest differs")
	}
	if q, _ := a.Queue("q"); q.Counts.Running != 20 || q.Counts.Succeeded != 20 {
		t.Fatalf("running %d succeeded %d, want 20 and 20 (20 claims of 2, one of each acked)", q.Counts.Running, q.Counts.Succeeded)
	}
}

// EncodeBatch over commands encoded one by one gives the bytes of
// EncodeCommand(BatchCmd); both decode back to the commands.
func TestBatchEncoding(t *testing.T) {
	cmds := []Command{
		&ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 2, TTL: time.Second, Kinds: []string{"k"}},
		&ExtendCmd{ID: "a", Token: 7, TTL: time.Second},
		&AckCmd{ID: "a", Token: 7, Result: []byte("r")},
		&NakCmd{ID: "b", Token: 8, Delay: time.Second, Error: "e"},
		&TermCmd{ID: "c", Token: 9, Reason: "why"},
	}
	var encs [][]byte
	for _, c := range cmds {
		encs = append(encs, mustEncode(t, c))
	}
	viaParts, err := EncodeBatch(encs)
	if err != nil {
		t.Fatal(err)
	}
	whole := mustEncode(t, BatchCmd{Cmds: cmds})
	if !bytes.Equal(viaParts, whole) {
		t.Fatalf("EncodeBatch %x, EncodeCommand %x", viaParts, whole)
	}
	got, err := DecodeCommand(whole)
	if err != nil || !reflect.DeepEqual(got, &BatchCmd{Cmds: cmds}) {
		t.Fatalf("decode: %+v, %v", got, err)
	}
}

// Only lease commands ride in a batch: a submit, cancel or nested batch
// inside one, an empty batch or a truncated one is refused whole, with the
// state unchanged but for the applied index.
func TestBatchRefusals(t *testing.T) {
	submit := mustEncode(t, &SubmitCmd{Jobs: []NewJob{{ID: "x", Queue: "q", Kind: "k"}}})
	ack := mustEncode(t, &AckCmd{ID: "x", Token: 1})
	if _, err := EncodeBatch([][]byte{ack, submit}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("EncodeBatch with a submit: %v", err)
	}
	if _, err := EncodeBatch(nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("EncodeBatch of nothing: %v", err)
	}
	if _, err := EncodeCommand(&BatchCmd{Cmds: []Command{&CancelCmd{ID: "x"}}}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("EncodeCommand with a cancel: %v", err)
	}
	if _, err := EncodeCommand(&BatchCmd{Cmds: []Command{&AckCmd{ID: ""}}}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("EncodeCommand with an invalid ack: %v", err)
	}
	good, _ := EncodeBatch([][]byte{ack, ack})
	nested := append([]byte{FormatVersion, byte(CmdBatch), 1}, appendBytes(nil, good)...)
	withSubmit := append([]byte{FormatVersion, byte(CmdBatch), 2}, append(appendBytes(nil, ack), appendBytes(nil, submit)...)...)
	cases := map[string][]byte{
		"nested":      nested,
		"with submit": withSubmit,
		"empty":       {FormatVersion, byte(CmdBatch), 0},
		"truncated":   good[:len(good)-1],
		"trailing":    append(append([]byte(nil), good...), 0),
	}
	for name, cmd := range cases {
		m := New()
		applyDecoded(t, m, 1, submit)
		before := m.Digest()
		r := applyDecoded(t, m, 2, cmd)
		if r.Err() == nil {
			t.Fatalf("%s: applied: %+v", name, r)
		}
		after := m.Digest()
		if after.Index != 2 {
			t.Fatalf("%s: applied index %d", name, after.Index)
		}
		m2 := New()
		applyDecoded(t, m2, 1, submit)
		applyDecoded(t, m2, 2, mustEncode(t, &RetryCmd{ID: "nope"})) // a refusal: only the index moves
		if after.Sum != m2.Digest().Sum || before.Sum == after.Sum {
			t.Fatalf("%s: state changed by a refused batch", name)
		}
	}
}

// SubmitJobSize is the length of the encoding it stands in for.
func TestSubmitJobSize(t *testing.T) {
	for _, nj := range []NewJob{
		{ID: "a", Queue: "q", Kind: "k"},
		{ID: string(make([]byte, 200)), Queue: "q", Kind: "k", Payload: make([]byte, 300), Priority: -70, RunAt: baseTime,
			MaxAttempts: 1000, Backoff: Backoff{Base: time.Second, Max: time.Hour, Factor: 3000, Jitter: 9}, IdempotencyKey: "key"},
	} {
		n, err := SubmitJobSize(&nj)
		if err != nil || n != len(mustEncode(t, &SubmitCmd{Jobs: []NewJob{nj}})) {
			t.Fatalf("size %d, %v; encoding is %d bytes", n, err, len(mustEncode(t, &SubmitCmd{Jobs: []NewJob{nj}})))
		}
	}
	if _, err := SubmitJobSize(&NewJob{ID: "a", Kind: "k"}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("job without a queue: %v", err)
	}
}

// DecodeResultWithoutPayloads decodes what DecodeResult does, claimed jobs
// without their payloads.
func TestDecodeResultWithoutPayloads(t *testing.T) {
	m := New()
	applyDecoded(t, m, 1, mustEncode(t, &SubmitCmd{Jobs: []NewJob{{ID: "a", Queue: "q", Kind: "k", Payload: []byte("pay")}}}))
	out := m.Apply(Entry{Index: 2, Term: 1, Time: baseTime, Cmd: mustEncode(t, &BatchCmd{Cmds: []Command{
		&ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 1, TTL: time.Minute},
		&AckCmd{ID: "a", Token: 9},
	}})})
	full, err := DecodeResult(out)
	if err != nil || string(full.Batch[0].Jobs[0].Payload) != "pay" {
		t.Fatalf("full: %+v %v", full, err)
	}
	lite, err := DecodeResultWithoutPayloads(out)
	if err != nil {
		t.Fatal(err)
	}
	full.Batch[0].Jobs[0].Payload = nil
	if !reflect.DeepEqual(full, lite) {
		t.Fatalf("without payloads:\n%+v\nwant\n%+v", lite, full)
	}
}

// applier applies commands to m at indexes 1, 2, ... and returns each
// one's result.
func applier(t *testing.T, m *Jobs) func(Command) []byte {
	var index uint64
	return func(c Command) []byte {
		t.Helper()
		index++
		return m.Apply(Entry{Index: index, Term: 1, Time: baseTime, Cmd: appendCommand(nil, c)})
	}
}

// DecodeResultWithoutEndedJobs decodes what DecodeResult does, but acks',
// naks' and terms' results without their job records (alone or batched;
// claims and extends keep theirs), and still refuses such a result whose
// record is cut.
func TestDecodeResultWithoutEndedJobs(t *testing.T) {
	m := New()
	apply := applier(t, m)
	apply(&SubmitCmd{Jobs: []NewJob{{ID: "a", Queue: "q", Kind: "k", Payload: []byte("pay")}, {ID: "b", Queue: "q", Kind: "k"},
		{ID: "c", Queue: "q", Kind: "k"}, {ID: "d", Queue: "q", Kind: "k"}}})
	claimed, err := DecodeResult(apply(&ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 3, TTL: time.Minute}))
	if err != nil || len(claimed.Jobs) != 3 {
		t.Fatalf("claim: %v, %d jobs", err, len(claimed.Jobs))
	}
	tok := claimed.Jobs[0].Lease.Token
	outs := map[string][]byte{
		"ack":          apply(&AckCmd{ID: claimed.Jobs[0].ID, Token: tok}),
		"nak":          apply(&NakCmd{ID: claimed.Jobs[1].ID, Token: tok}),
		"term":         apply(&TermCmd{ID: claimed.Jobs[2].ID, Token: tok, Reason: "r"}),
		"repeated ack": apply(&AckCmd{ID: claimed.Jobs[0].ID, Token: tok}),
		"batch": apply(&BatchCmd{Cmds: []Command{
			&ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 1, TTL: time.Minute},
			&AckCmd{ID: claimed.Jobs[0].ID, Token: tok},
			&ExtendCmd{ID: claimed.Jobs[0].ID, Token: tok}, // stale: refused
			&AckCmd{ID: "none", Token: 1},                  // refused
		}}),
	}
	strip := func(r *Result) {
		if r.Command == CmdAck || r.Command == CmdNak || r.Command == CmdTerm {
			r.Jobs = nil
		}
	}
	for name, out := range outs {
		full, err := DecodeResult(out)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lean, err := DecodeResultWithoutEndedJobs(out)
		if err != nil {
			t.Fatalf("%s lean: %v", name, err)
		}
		if name != "batch" && len(full.Jobs) != 1 {
			t.Fatalf("%s: %d jobs in the full result", name, len(full.Jobs))
		}
		strip(&full)
		for i := range full.Batch {
			strip(&full.Batch[i])
		}
		if !reflect.DeepEqual(full, lean) {
			t.Fatalf("%s without ended jobs:\n%+v\nwant\n%+v", name, lean, full)
		}
		if name == "batch" && (len(lean.Batch) != 4 || len(lean.Batch[0].Jobs) != 1 || lean.Batch[1].Err() != nil || lean.Batch[1].Jobs != nil) {
			t.Fatalf("batch: %+v", lean)
		}
		for cut := 1; cut < len(out); cut++ {
			if _, err := DecodeResultWithoutEndedJobs(out[:cut]); !errors.Is(err, ErrInvalidResult) {
				t.Fatalf("%s cut at %d of %d: %v", name, cut, len(out), err)
			}
		}
	}
}

// ScanBatch reads from a batch's result (or a lease command's alone),
// undecoded, whether a nak in it put a job back in its queue: a nak that
// changed the job, not one repeated, refused, or an ack; and it does not
// read other results or cut ones.
func TestScanBatch(t *testing.T) {
	m := New()
	apply := applier(t, m)
	apply(&SubmitCmd{Jobs: []NewJob{{ID: "a", Queue: "q", Kind: "k"}, {ID: "b", Queue: "q", Kind: "k"}, {ID: "c", Queue: "q", Kind: "k"}}})
	claimed, err := DecodeResult(apply(&ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 3, TTL: time.Minute}))
	if err != nil || len(claimed.Jobs) != 3 {
		t.Fatalf("claim: %v, %d jobs", err, len(claimed.Jobs))
	}
	tok := map[string]uint64{}
	for _, j := range claimed.Jobs {
		tok[j.ID] = j.Lease.Token
	}
	for _, tc := range []struct {
		name     string
		cmd      Command
		requeues bool
		ok       bool
	}{
		{"ack and extend", &BatchCmd{Cmds: []Command{&AckCmd{ID: "a", Token: tok["a"]}, &ExtendCmd{ID: "b", Token: tok["b"], TTL: time.Minute}}}, false, true},
		{"nak", &BatchCmd{Cmds: []Command{&ExtendCmd{ID: "c", Token: tok["c"], TTL: time.Minute}, &NakCmd{ID: "b", Token: tok["b"]}}}, true, true},
		{"nak repeated", &BatchCmd{Cmds: []Command{&NakCmd{ID: "b", Token: tok["b"]}}}, false, true},
		{"nak refused", &BatchCmd{Cmds: []Command{&NakCmd{ID: "c", Token: tok["c"] + 1000}}}, false, true},
		{"a nak alone", &NakCmd{ID: "c", Token: tok["c"]}, true, true},
		{"not a lease command", &CancelCmd{ID: "a"}, false, false},
	} {
		out := apply(tc.cmd)
		requeues, ok := ScanBatch(out, nil)
		if requeues != tc.requeues || ok != tc.ok {
			t.Errorf("%s: ScanBatch = %v, %v; want %v, %v", tc.name, requeues, ok, tc.requeues, tc.ok)
		}
		if r, err := DecodeResult(out); err != nil {
			t.Fatal(err)
		} else {
			checkScanBatch(t, out, r, (r.Command == CmdBatch || Batchable(r.Command)) && r.Code == CodeOK)
		}
		for _, cut := range []int{len(out) - 1, 3, 4} {
			if cut < len(out) {
				if _, ok := ScanBatch(out[:cut], func(string) bool { return true }); ok {
					t.Errorf("%s: a result cut to %d of %d bytes was read", tc.name, cut, len(out))
				}
			}
		}
	}
}

// EncodeCommandWithRoom and EncodeBatchWithRoom encode what EncodeCommand
// and EncodeBatch do, behind room zero bytes, in one buffer that needs no
// growing, and refuse what they refuse.
func TestEncodeWithRoom(t *testing.T) {
	cmds := []Command{
		&SubmitCmd{Jobs: []NewJob{{ID: "a", Queue: "q", Kind: "k", Payload: []byte("pay")}, {ID: "b", Queue: "q", Kind: "k"}}},
		&ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 2, TTL: time.Minute, ID: "c1"},
		&AckCmd{ID: "a", Token: 7, Result: []byte("r")},
	}
	var encoded [][]byte
	for _, c := range cmds {
		want := mustEncode(t, c)
		got, err := EncodeCommandWithRoom(c, 9)
		if err != nil || !bytes.Equal(got[:9], make([]byte, 9)) || !bytes.Equal(got[9:], want) {
			t.Fatalf("%T: %v, room zero %v, encoding equal %v", c, err, bytes.Equal(got[:9], make([]byte, 9)), bytes.Equal(got[9:], want))
		}
		if _, ok := c.(*SubmitCmd); ok && cap(got) != len(got) {
			t.Fatalf("submit: %d bytes in a buffer of %d", len(got), cap(got))
		}
		if c.Type() != CmdSubmit {
			encoded = append(encoded, want)
		}
	}
	want, _ := EncodeBatch(encoded)
	got, err := EncodeBatchWithRoom(encoded, 9)
	if err != nil || !bytes.Equal(got[9:], want) || !bytes.Equal(got[:9], make([]byte, 9)) {
		t.Fatalf("batch: %v, encoding equal %v", err, bytes.Equal(got[9:], want))
	}
	if _, err := EncodeCommandWithRoom(&AckCmd{ID: ""}, 9); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("invalid ack: %v", err)
	}
	if _, err := EncodeBatchWithRoom([][]byte{mustEncode(t, cmds[0])}, 9); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("batch of a submit: %v", err)
	}
}
