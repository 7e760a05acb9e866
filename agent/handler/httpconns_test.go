package handler

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/axsched/ax/pkg/retry"
)

// TestHTTPKeepsWorkersConnections: workers calling one host at once
// reuse their connections. With IdlePerHost at the worker count, 20
// rounds of 8 concurrent calls open at most 16 connections (8 a round,
// and as many again for a connection still on its way back to the pool
// when the next round starts); with net/http's default of 2 idle a host,
// every round would dial 6 anew, about 120 in all.
func TestHTTPKeepsWorkersConnections(t *testing.T) {
	const workers, rounds = 8, 20
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	h, err := NewHTTP(HTTPConfig{Allow: []string{srv.URL + "/"}, IdlePerHost: workers})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := json.Marshal(HTTPPayload{URL: srv.URL + "/ok"})
	for range rounds {
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				if res := h.Run(context.Background(), Task{ExecID: "e", Attempt: 1, Payload: p}); res.Outcome != retry.OutcomeSuccess {
					t.Errorf("result %+v, want success", res)
				}
			})
		}
		wg.Wait()
	}
	if n := opened.Load(); n > 2*workers {
		t.Fatalf("%d rounds of %d concurrent calls opened %d connections, want at most %d", rounds, workers, n, 2*workers)
	}
}
