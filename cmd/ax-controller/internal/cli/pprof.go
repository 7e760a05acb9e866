package cli

import (
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// startPprof serves the Go runtime profiles (net/http/pprof, under
// /debug/pprof/) on addr, which must be a loopback address: they are for
// diagnosing this controller (go tool pprof), not an API. It returns the
// function that stops serving.
func startPprof(addr string) (func(), error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, configErr("pprof-listen", "%v", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, configErr("pprof-listen", "%q is not a loopback address", host)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, configErr("pprof-listen", "%v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }, nil
}
