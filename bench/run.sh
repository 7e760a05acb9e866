#!/usr/bin/env bash
# Runs ax and asynq + Redis side by side (bench/vsasynq): builds the ax
# binaries, installs redis-server when it is missing (Debian/Ubuntu), and
# passes its arguments on, e.g.  bench/run.sh -reps 3 -tasks 5000
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v redis-server >/dev/null; then
  echo "installing redis-server" >&2
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq redis-server >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq redis-server >/dev/null; fi
  # The package starts a system instance; the benchmark starts its own.
  (systemctl stop redis-server 2>/dev/null || service redis-server stop 2>/dev/null || true) >/dev/null
fi
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$root" && go build -o "$bin/" ./cmd/ax-controller ./cmd/ax-agent)
(cd "$root/bench/vsasynq" && go build -o "$bin/vsasynq" .)
"$bin/vsasynq" -bin "$bin" "$@"
