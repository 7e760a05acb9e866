// Command ax-controller runs the ax controller (serve) and operates it
// through its HTTP API (job, exec, agent, version). The commands live in
// cmd/ax-controller/internal/cli; main only wires signals, streams and the
// version stamped with:
//
//	go build -ldflags "-X main.version=v1.0.0 -X main.commit=$(git rev-parse --short HEAD) -X main.date=$(date -u +%FT%TZ)"
package main
