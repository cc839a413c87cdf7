package seam

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// stubPipeline is an inner pipeline whose response reader, like
// hashicorp/raft's, blocks handing a response over until someone reads its
// Consumer, and whose sends block until that reader took the previous one.
type stubPipeline struct {
	inflight chan raft.AppendFuture
	consumer chan raft.AppendFuture
	closed   chan struct{}
}

type doneFuture struct{ resp raft.AppendEntriesResponse }

func (f *doneFuture) Error() error                          { return nil }
func (f *doneFuture) Start() time.Time                      { return time.Time{} }
func (f *doneFuture) Request() *raft.AppendEntriesRequest   { return &raft.AppendEntriesRequest{} }
func (f *doneFuture) Response() *raft.AppendEntriesResponse { return &f.resp }

func newStub() *stubPipeline {
	s := &stubPipeline{inflight: make(chan raft.AppendFuture), consumer: make(chan raft.AppendFuture), closed: make(chan struct{})}
	go func() {
		for {
			select {
			case f := <-s.inflight:
				select {
				case s.consumer <- f:
				case <-s.closed:
					return
				}
			case <-s.closed:
				return
			}
		}
	}()
	return s
}

func (s *stubPipeline) AppendEntries(*raft.AppendEntriesRequest, *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	f := &doneFuture{}
	select {
	case s.inflight <- f:
		return f, nil
	case <-s.closed:
		return nil, raft.ErrPipelineShutdown
	}
}
func (s *stubPipeline) Consumer() <-chan raft.AppendFuture { return s.consumer }
func (s *stubPipeline) Close() error                       { close(s.closed); return nil }

// After raft stops reading the Consumer (its decoder ended on a refused
// append), sends still get through, so the sender can notice and close the
// pipeline; Close returns. The bare stub wedges on the second send.
func TestDrainPipelineNeverWedgesSends(t *testing.T) {
	p := newDrainPipeline(newStub())
	// raft read one response, then its decoder ended.
	if _, err := p.AppendEntries(nil, nil); err != nil {
		t.Fatal(err)
	}
	<-p.Consumer()
	done := make(chan error, 1)
	go func() {
		for i := 0; i < 16; i++ {
			if _, err := p.AppendEntries(nil, nil); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pipelined sends wedged with nobody reading the consumer")
	}
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close wedged")
	}

	// The same sequence on the bare stub wedges: the point of the wrapper.
	bare := newStub()
	bare.AppendEntries(nil, nil)
	<-bare.Consumer()
	bare.AppendEntries(nil, nil) // taken by the reader, which now blocks on the consumer
	wedged := make(chan struct{})
	go func() { bare.AppendEntries(nil, nil); close(wedged) }()
	select {
	case <-wedged:
		t.Fatal("the stub does not model the wedge")
	case <-time.After(200 * time.Millisecond): // a wedge cannot be awaited: bounded observation
	}
	bare.Close()
}
