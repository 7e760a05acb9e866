#!/usr/bin/env bash
# scripts/demo.sh — the quick start (make demo).
#
# Builds ax-controller and ax-agent into a temporary directory, starts the
# controller (embedded NATS, temporary data dir, free loopback ports), starts
# two agents (edge-7 in group site=plant-3, gw-1 at site=hq), applies the demo
# jobs of configs/demo/jobs, shows the live event table (exec watch) for
# DEMO_SECONDS, prints a summary and stops everything it started, by PID.
#
# Needs only Go, bash and the usual coreutils (no curl, no nc).
#
# Environment:
#   DEMO_SECONDS    how long to watch (default 30)
#   DEMO_API_PORT   API port (default: a free random port)
#   DEMO_NATS_PORT  NATS port (default: a free random port)
#   DEMO_KEEP=1     keep the temporary directory (logs, data) for a look afterwards
#   DEMO_BIN_DIR    use the binaries in this directory instead of building
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
DEMO_SECONDS=${DEMO_SECONDS:-30}
case $DEMO_SECONDS in '' | *[!0-9]*)
	echo "demo: DEMO_SECONDS must be a whole number of seconds, got '$DEMO_SECONDS'" >&2
	exit 2
	;;
esac

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ax-demo.XXXXXX")
PIDS=()

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ ${#PIDS[@]} -gt 0 ]; then
		say "stopping (PIDs ${PIDS[*]})"
		# Stop in reverse order of start: watch, agents, then the controller.
		local i pid
		for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
			pid=${PIDS[i]}
			kill -TERM "$pid" 2>/dev/null || true
			for _ in $(seq 1 100); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.1
			done
			if kill -0 "$pid" 2>/dev/null; then
				echo "PID $pid did not stop within 10s; killing it"
				kill -KILL "$pid" 2>/dev/null || true
			fi
			wait "$pid" 2>/dev/null || true
		done
	fi
	if [ "${DEMO_KEEP:-0}" = 1 ]; then
		echo "kept $WORK (logs: $WORK/*.log)"
	else
		rm -rf "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# port_free PORT: nothing accepts connections on 127.0.0.1:PORT.
port_free() {
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# free_port [EXCEPT]: a random free port in 20000..59999 other than EXCEPT.
free_port() {
	local p
	for _ in $(seq 1 50); do
		p=$((20000 + RANDOM % 40000))
		if [ "$p" != "${1:-}" ] && port_free "$p"; then
			echo "$p"
			return 0
		fi
	done
	echo "demo: found no free port" >&2
	return 1
}

# wait_for DESCRIPTION SECONDS COMMAND...: poll COMMAND until it succeeds;
# give up early if a process the demo started has exited.
wait_for() {
	local what=$1 secs=$2 pid
	shift 2
	for _ in $(seq 1 $((secs * 5))); do
		if "$@" >/dev/null 2>&1; then
			return 0
		fi
		for pid in "${PIDS[@]}"; do
			if ! kill -0 "$pid" 2>/dev/null; then
				echo "demo: PID $pid exited while waiting for $what" >&2
				return 1
			fi
		done
		sleep 0.2
	done
	echo "demo: timed out after ${secs}s waiting for $what" >&2
	return 1
}

# alive NAME PID LOG: fail with the log tail if PID has exited.
alive() {
	if ! kill -0 "$2" 2>/dev/null; then
		echo "demo: $1 exited; last lines of $3:" >&2
		tail -n 20 "$3" >&2 || true
		return 1
	fi
}

API_PORT=${DEMO_API_PORT:-$(free_port)}
NATS_PORT=${DEMO_NATS_PORT:-$(free_port "$API_PORT")}
for p in "$API_PORT" "$NATS_PORT"; do
	if ! port_free "$p"; then
		echo "demo: port $p is in use" >&2
		exit 1
	fi
done
API=http://127.0.0.1:$API_PORT
NATS=nats://127.0.0.1:$NATS_PORT
# Keep AX_* settings of the caller's shell out of the demo processes
# (AX_NATS_URL would make serve look for an external NATS server).
while IFS='=' read -r name _; do
	case $name in AX_*) unset "$name" ;; esac
done < <(env)

# 1. Binaries.
if [ -n "${DEMO_BIN_DIR:-}" ]; then
	BIN=$DEMO_BIN_DIR
else
	BIN=$WORK/bin
	say "building ax-controller and ax-agent into $BIN"
	ver=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
	CGO_ENABLED=0 go build -trimpath \
		-ldflags "-X main.version=$ver-demo -X main.commit=$(git rev-parse --short HEAD 2>/dev/null || echo none) -X main.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
		-o "$BIN/" ./cmd/ax-controller ./cmd/ax-agent
fi
CTL=$BIN/ax-controller
AGENT=$BIN/ax-agent
# axc runs a client command of ax-controller against the demo's API.
axc() { "$CTL" --api "$API" "$@"; }
"$CTL" version
"$AGENT" version

# 2. Render the demo configs: @DEMO_DIR@ → where the device scripts live.
DEV=$WORK/device
mkdir -p "$DEV" "$WORK/jobs" "$WORK/agents"
cp configs/demo/valvectl.sh configs/demo/gatewayctl.sh "$DEV/"
chmod 0755 "$DEV"/*.sh
render() { sed "s|@DEMO_DIR@|$DEV|g" "$1" >"$2"; }
for f in configs/demo/jobs/*.yaml; do render "$f" "$WORK/jobs/$(basename "$f")"; done
for a in edge-7 gw-1; do render "configs/demo/$a.yaml" "$WORK/agents/$a.yaml"; done

# 3. Controller.
say "starting ax-controller serve (API $API, NATS $NATS, data $WORK/ctl)"
"$CTL" serve --config configs/demo/ax-controller.yaml --data-dir "$WORK/ctl" \
	--listen "127.0.0.1:$API_PORT" --nats-port "$NATS_PORT" >"$WORK/controller.log" 2>&1 &
CTL_PID=$!
PIDS+=("$CTL_PID")
wait_for "the controller API" 60 axc agent ls || { alive controller "$CTL_PID" "$WORK/controller.log" || true; exit 1; }
echo "controller up (PID $CTL_PID, log $WORK/controller.log)"

# 4. Agents.
for a in edge-7 gw-1; do
	"$AGENT" run --config "$WORK/agents/$a.yaml" --data-dir "$WORK/agents/$a" --nats-url "$NATS" \
		>"$WORK/$a.log" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	echo "agent $a started (PID $pid, log $WORK/$a.log)"
done
agents_online() {
	[ "$(axc agent ls -o json | grep -c '"online": *true')" -ge 2 ]
}
if ! wait_for "both agents to register" 30 agents_online; then
	for i in 1 2; do alive agent "${PIDS[i]}" "$WORK/$([ $i = 1 ] && echo edge-7 || echo gw-1).log" || true; done
	axc agent ls || true
	exit 1
fi
say "agents"
axc agent ls

# 5. Jobs.
say "applying the demo jobs (configs/demo/jobs)"
axc job apply -f "$WORK/jobs"
axc job ls

# 6. Live table of state changes.
say "live executions for ${DEMO_SECONDS}s (ax-controller exec watch --since 1m)"
"$CTL" exec watch --nats-url "$NATS" --since 1m &
WATCH_PID=$!
PIDS+=("$WATCH_PID")
for _ in $(seq 1 "$DEMO_SECONDS"); do
	sleep 1
	alive controller "$CTL_PID" "$WORK/controller.log"
done
kill -TERM "$WATCH_PID" 2>/dev/null || true
wait "$WATCH_PID" 2>/dev/null || true
unset 'PIDS[${#PIDS[@]}-1]'

# 7. Summary.
say "summary: ax-controller exec ls"
axc exec ls --limit 0
say "executions by state"
axc exec ls --limit 0 -o json | grep -o '"state": *"[A-Z_]*"' | sed 's/.*"\([A-Z_]*\)"$/\1/' | sort | uniq -c
say "agents (LEASES: the group jobs each one holds, job@epoch)"
axc agent ls
