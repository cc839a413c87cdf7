package client

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// sse serves events (index, job) as jobd does, then ends the stream.
func sse(t *testing.T, froms *[]string, mu *sync.Mutex, events [][2]string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		*froms = append(*froms, r.URL.Query().Get("from"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events {
			fmt.Fprintf(w, "id: %s\nevent: acked\ndata: {\"index\":%s,\"kind\":\"acked\",\"job\":%q}\n\n", ev[0], ev[0], ev[1])
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A watch whose stream ends resumes on the next member at the last index
// delivered, skipping the events of that index it delivered already (one
// entry may produce many events): nothing twice, nothing skipped.
func TestWatchResumesWithinAnIndex(t *testing.T) {
	var mu sync.Mutex
	var froms []string
	a := sse(t, &froms, &mu, [][2]string{{"5", "a"}, {"5", "b"}, {"6", "c"}})
	b := sse(t, &froms, &mu, [][2]string{{"6", "c"}, {"6", "d"}, {"7", "e"}})
	c := newTestClient(t, a.URL, b.URL)
	var got []string
	err := c.Watch(testCtx(t), WatchRequest{From: 5}, func(ev Event) error {
		got = append(got, ev.JobID)
		if len(got) == 5 {
			return ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(got, ","); s != "a,b,c,d,e" {
		t.Fatalf("delivered %s, want a,b,c,d,e", s)
	}
	if s := strings.Join(froms, ","); s != "5,6" {
		t.Fatalf("asked from %s, want 5,6", s)
	}
}
