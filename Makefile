# ax — see README.md.
.PHONY: test build vet fmt demo cross-build dist opscheck clean

# The README's test command: gofmt check, go vet, go test -race.
test:
	bash scripts/test.sh

build:
	CGO_ENABLED=0 go build -trimpath -o bin/ ./cmd/...

vet:
	go vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

# Quick start: build both binaries into a temp dir, run a controller and two
# agents with the demo jobs, watch them for DEMO_SECONDS (default 30), stop.
demo:
	bash scripts/demo.sh

# Static, stripped, version-stamped binaries for linux/amd64, arm64, armv7,
# armv6 in dist/, with dist/SHA256SUMS and a size table.
cross-build:
	bash scripts/cross-build.sh

# cross-build, then .deb and .rpm packages of both binaries for the same
# four targets (nfpm, pinned in packaging/go.mod), all in dist/SHA256SUMS.
dist:
	bash scripts/package.sh

# The checks of the operations files (configs, alerts, dashboard, size budget).
opscheck:
	go test -count=1 ./internal/opscheck/

clean:
	rm -rf bin dist
