package jobraft_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// Watch's retained window, at its boundary: from the oldest retained index
// it starts; from one below it, ErrCompacted naming that oldest index.
func TestWatchCompactedBoundary(t *testing.T) {
	c := clustertest.StartCtls(t, 1, func(_ int, cfg *jobraft.Config) { cfg.WatchRetainEntries = 4 })
	c.WaitLeader(wait)
	ctl := c.Ctls[0]
	ctx := clustertest.Ctx(t, wait)
	var ids []string
	for k := 0; k < 10; k++ {
		// One at a time: one entry each.
		j, err := ctl.Submit(ctx, jobraft.SubmitRequest{Queue: "wb", Kind: "k"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	// Only entries with events are recorded, and nothing else makes events
	// now: the window is stable.
	oldest := ctl.LocalStats().WatchOldest
	if oldest <= 1 {
		t.Fatalf("oldest retained %d: nothing was compacted, the test proves nothing", oldest)
	}
	_, err := ctl.Watch(ctx, oldest-1, jobraft.WatchFilter{})
	var ce *jobraft.CompactedError
	if !errors.Is(err, jobraft.ErrCompacted) || !errors.As(err, &ce) || ce.Oldest != oldest || ce.From != oldest-1 {
		t.Fatalf("watch from oldest-1 = %d: %v, want ErrCompacted with oldest %d", oldest-1, err, oldest)
	}
	ch, err := ctl.Watch(ctx, oldest, jobraft.WatchFilter{})
	if err != nil {
		t.Fatalf("watch from the oldest retained index %d: %v", oldest, err)
	}
	// It yields exactly the retained events: the last four submits.
	var got []string
	for len(got) < 4 {
		ev := <-ch
		if ev.Kind == jobraft.EventError || ev.Index < oldest {
			t.Fatalf("event %+v from index %d", ev, oldest)
		}
		got = append(got, ev.JobID)
	}
	if fmt.Sprint(got) != fmt.Sprint(ids[6:]) {
		t.Fatalf("events for %v, want %v", got, ids[6:])
	}
	if st := ctl.LocalStats(); st.WatchOldest != oldest {
		t.Fatalf("the window moved (%d → %d) while testing", oldest, st.WatchOldest)
	}
}

// Watch racing Close never adds to the controller's WaitGroup after Close
// waited on it: a Watch either starts (and ends with ErrClosed) or is
// refused with ErrClosed.
func TestWatchRacingCloseIsSafe(t *testing.T) {
	ctl := clustertest.StartCtls(t, 1, nil)
	c := ctl.Ctls[0]
	ctl.WaitLeader(wait)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, err := c.Watch(context.Background(), 0, jobraft.WatchFilter{})
			if err != nil {
				if !errors.Is(err, jobraft.ErrClosed) {
					t.Errorf("watch: %v", err)
				}
				return
			}
			for range ch {
			}
		}()
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}
