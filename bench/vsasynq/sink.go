package main

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// sink is the handlers' HTTP target: it counts requests, and records the
// submit → start latency of requests that carry their submit time (t, unix
// ns) and the second each request arrived in.
type sink struct {
	srv *http.Server
	url string

	mu      sync.Mutex
	hits    int
	lat     []time.Duration
	perSec  map[int64]int
	dupes   int
	seen    map[string]struct{}
	trackID bool
}

func newSink() (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sink{url: "http://" + ln.Addr().String(), perSec: map[int64]int{}, seen: map[string]struct{}{}}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.hit), ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

func (s *sink) hit(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	q := r.URL.Query()
	s.mu.Lock()
	s.hits++
	s.perSec[now.Unix()]++
	if t, err := strconv.ParseInt(q.Get("t"), 10, 64); err == nil {
		s.lat = append(s.lat, now.Sub(time.Unix(0, t)))
	}
	if id := q.Get("id"); id != "" && s.trackID {
		if _, dup := s.seen[id]; dup {
			s.dupes++
		}
		s.seen[id] = struct{}{}
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// reset forgets everything recorded so far.
func (s *sink) reset(trackID bool) {
	s.mu.Lock()
	s.hits, s.dupes, s.lat = 0, 0, nil
	s.perSec, s.seen, s.trackID = map[int64]int{}, map[string]struct{}{}, trackID
	s.mu.Unlock()
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits
}

// snapshot returns the latencies and the duplicate count.
func (s *sink) snapshot() ([]time.Duration, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.lat...), s.dupes
}

// between counts requests that arrived in whole seconds [from, to).
func (s *sink) between(from, to time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for sec := from.Unix(); sec < to.Unix(); sec++ {
		n += s.perSec[sec]
	}
	return n
}
