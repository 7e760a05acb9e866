#!/usr/bin/env bash
# The test command of the README: gofmt check, go vet, go test -race.
set -euo pipefail
cd "$(dirname "$0")/.."
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go vet ./...
# The package build and install checks (lintian, dpkg) are heavy: run them
# after the suite so they do not load the machine under its timing tests.
go test -race -count=1 -timeout 20m -skip '^TestPackages$' ./...
go test -count=1 -timeout 20m -run '^TestPackages$' ./e2e/ops/
# The external-server test skips itself under -race (a data race inside
# nats-server 2.15.2's reload, not in ax): run it without. So does the NATS
# cluster's node loss (a data race inside 2.15.2's clustered streams).
go test -count=1 -timeout 10m -run '^TestExternalServerFromSampleConfig$' ./e2e/security/
go test -count=1 -timeout 10m -run '^TestNATSClusterNodeLoss$' ./e2e/
