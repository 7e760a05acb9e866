package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/internal/faultproxy"
	"github.com/axsched/ax/internal/testutil"
)

// The replicas of TestFaultInjectionReplicas (AX_FAULT_REPLICAS=N, 2-5):
// N controller processes (nodes fault-1 … fault-N) on one NATS server with
// JetStream that runs in the test process and is never faulted, each
// linked to it through its own faultproxy, so that a replica's link can be
// cut (reset) as an agent's can, or frozen (no reset: the connection stays
// open and carries nothing until its pings time out). The replicas split
// the shards by their leases; a killed, frozen or cut-off replica's shards
// move to the others after the
// lease TTL, and the replica must stop working them (fencing). The test
// reaches the API through apiFront, which forwards each request to a
// replica that is up, as a load balancer with health checks would; any
// replica answers for every job (the API forwards to the shard's owner).

// faultCtl is one controller process of the cluster.
type faultCtl struct {
	node    string // "controller" alone; fault-1 … fault-N as replicas
	dir     string // its data dir, kept across restarts
	apiAddr string
	// proxy is the replica's link to the NATS server (nil alone: the
	// controller embeds its server).
	proxy   *faultproxy.Proxy
	proc    *testutil.Child // nil while killed
	stopped bool            // SIGSTOPped
	cut     bool            // its link cut
	// stalls are when a fault of it began (kill, stop, link cut or
	// freeze): the history check's one excuse (checkHistoryOrder).
	stalls []time.Time
}

// env is the helper process's environment for ctl.
func (ctl *faultCtl) env(natsPort int) []string {
	env := []string{envFaultCtlDir + "=" + ctl.dir, envFaultCtlAPI + "=" + ctl.apiAddr}
	if ctl.proxy != nil {
		return append(env, envFaultCtlNATSURL+"="+ctl.proxy.URL(), envFaultCtlNode+"="+ctl.node)
	}
	return append(env, envFaultCtlNATS+"="+strconv.Itoa(natsPort))
}

// up reports whether ctl can answer: running, not frozen, linked.
func (ctl *faultCtl) up() bool { return ctl.proc != nil && !ctl.stopped && !ctl.cut }

// apiFront is the API address of a cluster of replicas: it forwards each
// request to the first replica that is up, starting with the next one
// each time, and to the next when a replica cannot be reached.
type apiFront struct {
	client *http.Client
	mu     sync.Mutex
	addrs  []string
	up     []bool
	next   int
}

// newAPIFront serves the front on a loopback port until the test ends
// and returns its address.
func newAPIFront(t *testing.T, addrs []string) (*apiFront, string) {
	t.Helper()
	f := &apiFront{client: &http.Client{Timeout: 30 * time.Second}, addrs: addrs, up: make([]bool, len(addrs))}
	for i := range f.up {
		f.up[i] = true
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return f, ln.Addr().String()
}

// set records whether replica i is up, and its API address.
func (f *apiFront) set(i int, addr string, up bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addrs[i], f.up[i] = addr, up
}

// order is the replicas to try, those up first, starting after the last pick.
func (f *apiFront) order() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var upAddrs, down []string
	n := len(f.addrs)
	for k := range n {
		i := (f.next + k) % n
		if f.up[i] {
			upAddrs = append(upAddrs, f.addrs[i])
		} else {
			down = append(down, f.addrs[i])
		}
	}
	f.next = (f.next + 1) % n
	return append(upAddrs, down...)
}

func (f *apiFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var errs []error
	for _, addr := range f.order() {
		req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+addr+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := f.client.Do(req)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		return
	}
	http.Error(w, fmt.Sprintf("no replica reachable: %v", errors.Join(errs...)), http.StatusBadGateway)
}
