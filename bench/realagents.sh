#!/usr/bin/env bash
# realagents.sh: N real ax-agent processes against one ax-controller (embedded
# NATS, the default nats.auth: none, a fresh data directory), each agent with
# its own data directory and JOBS periodic exec jobs (/bin/true every EVERY)
# pinned to it. It prints the controller's CPU and RSS over a steady window
# and the SUCCESS rate; then kills the controller with SIGKILL, restarts it on
# the same data directory and prints when it answers /readyz, when every agent
# was heard from again (last_seen after the restart: the agents register again
# when their NATS connection is back) and when the SUCCESS rate is back to 90 %
# of the steady one (over 2 s). It stops every process it started (by PID).
#
#   bench/realagents.sh                 # N=500 JOBS=2 EVERY=30 (seconds)
#   N=200 MEASURE=20 bench/realagents.sh
#   BIN_DIR=/tmp/bin bench/realagents.sh   # ax-controller and ax-agent built already
set -euo pipefail

N=${N:-500}
JOBS=${JOBS:-2}
EVERY=${EVERY:-30} # seconds
SETTLE=${SETTLE:-$((EVERY + 10))} # every job fired once before the window
MEASURE=${MEASURE:-30}
API_PORT=${API_PORT:-28180}
NATS_PORT=${NATS_PORT:-24322}
API=http://127.0.0.1:$API_PORT
if [ "$N" -gt 1000 ] || [ "$N" -lt 1 ]; then
	echo "realagents: N must be 1 to 1000 (one page of GET /v1/agents), got $N" >&2
	exit 2
fi

cd "$(dirname "$0")/.."
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ax-realagents.XXXXXX")
PIDS=()
CTL_PID=
cleanup() {
	trap - EXIT INT TERM
	[ -n "$CTL_PID" ] && kill -TERM "$CTL_PID" 2>/dev/null || true
	for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}" $CTL_PID; do wait "$pid" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap 'echo "realagents: failed at line $LINENO" >&2' ERR
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -n "${BIN_DIR:-}" ]; then
	BIN=$BIN_DIR
else
	BIN=$WORK/bin
	CGO_ENABLED=0 go build -o "$BIN/" ./cmd/ax-controller ./cmd/ax-agent
fi

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }
# cpu PID: utime+stime in clock ticks; rss PID: resident MiB.
cpu() { awk '{ sub(/.*\) /, ""); split($0, f, " "); print f[12] + f[13] }' "/proc/$1/stat"; }
rss() { awk '/VmRSS/ { printf "%d", $2 / 1024 }' "/proc/$1/status"; }
# A request the loaded controller does not answer within 10 s counts as
# nothing yet (0), it does not end the script.
successes() {
	curl -sf -m 10 "$API/metrics" | awk '/^ax_executions_total\{state="SUCCESS"\}/ { printf "%d", $2 }' || echo 0
}
online() { curl -sf -m 10 "$API/v1/agents?limit=1" | jq -r '.counts.online' 2>/dev/null || echo 0; }

start_controller() {
	"$BIN/ax-controller" serve --data-dir "$WORK/ctl" --listen "127.0.0.1:$API_PORT" \
		--nats-port "$NATS_PORT" --log-level error >>"$WORK/controller.log" 2>&1 &
	CTL_PID=$!
}

start_controller
for _ in $(seq 1 300); do curl -sf -m 10 "$API/readyz" >/dev/null && break; sleep 0.2; done
cat >"$WORK/agent.yaml" <<EOF
exec:
  allow: ["/bin/true"]
log:
  level: error
EOF
for i in $(seq -f '%04g' 1 "$N"); do
	"$BIN/ax-agent" run --config "$WORK/agent.yaml" --id "real-$i" --data-dir "$WORK/agents/real-$i" \
		--nats-url "nats://127.0.0.1:$NATS_PORT" >>"$WORK/agents.log" 2>&1 &
	PIDS+=($!)
done
t0=$(now)
until [ "$(online)" -ge "$N" ]; do
	sleep 0.5
	if awk -v a="$t0" -v b="$(now)" 'BEGIN { exit !(b - a > 300) }'; then
		echo "realagents: only $(online) of $N agents online after 300 s" >&2
		exit 1
	fi
done
echo "agents $N: all online after $(since "$t0")"

# JOBS jobs per agent, created 1,000 to a batch.
jq -nc --argjson n "$N" --argjson k "$JOBS" --arg every "${EVERY}s" '
	[range(1; $n + 1) as $i | range(0; $k) as $j | {name: "real-\($i)-\($j)", handler: "exec",
		payload: {command: "/bin/true"}, schedule: {every: $every},
		target: {agent: ("real-" + ($i | tostring | ("0000" + .)[-4:]))}}]
	| _nwise(1000) | {jobs: .}' | while read -r batch; do
	curl -sf -m 60 -X POST -H 'Content-Type: application/json' --data-binary "$batch" "$API/v1/jobs:batch" |
		jq -e '[.results[] | select(.status != 201)] | length == 0' >/dev/null || {
		echo "realagents: a job batch was refused" >&2
		exit 1
	}
done
echo "$((N * JOBS)) jobs created (every ${EVERY}s, exec /bin/true)"

sleep "$SETTLE"
c0=$(cpu "$CTL_PID") s0=$(successes) t0=$(now)
sleep "$MEASURE"
c1=$(cpu "$CTL_PID") s1=$(successes)
el=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
tck=$(getconf CLK_TCK)
rate=$(awk -v a="$s0" -v b="$s1" -v e="$el" 'BEGIN { printf "%.1f", (b - a) / e }')
echo "steady ${MEASURE}s: controller CPU $(awk -v a="$c0" -v b="$c1" -v e="$el" -v t="$tck" 'BEGIN { printf "%.1f", 100 * (b - a) / t / e }') % of a core," \
	"RSS $(rss "$CTL_PID") MiB; SUCCESS $rate/s; load $(cut -d' ' -f1-3 /proc/loadavg)"

kill -KILL "$CTL_PID"
wait "$CTL_PID" 2>/dev/null || true
t0=$(now)
restart=${t0%.*} # whole seconds: heard from again = last_seen in a later second
start_controller
until curl -sf -m 10 "$API/readyz" >/dev/null; do sleep 0.05; done
echo "after kill -9: ready $(since "$t0") after the restart"
back=$(awk -v r="$rate" 'BEGIN { print 0.9 * r }')
heard= ratet= prev=$(successes || echo 0) pt=$(now)
while [ -z "$heard" ] || [ -z "$ratet" ]; do
	sleep 2
	if [ -z "$heard" ]; then
		n=$(curl -sf -m 10 "$API/v1/agents?limit=1000" | jq --argjson t "$restart" \
			'[.agents[] | select(.last_seen | sub("\\.[0-9]+"; "") | fromdate > $t)] | length' || echo 0)
		if [ "$n" -ge "$N" ]; then heard=$(since "$t0"); fi
	fi
	cur=$(successes || echo "$prev") ct=$(now)
	if [ -z "$ratet" ] && awk -v a="$prev" -v b="$cur" -v x="$pt" -v y="$ct" -v w="$back" 'BEGIN { exit !((b - a) / (y - x) >= w) }'; then
		ratet=$(since "$t0")
	fi
	prev=$cur pt=$ct
	if awk -v a="$t0" -v b="$(now)" 'BEGIN { exit !(b - a > 300) }'; then
		echo "realagents: not converged within 300 s (heard from all: ${heard:-no}, rate back: ${ratet:-no})" >&2
		exit 1
	fi
done
echo "after kill -9: all $N heard from again $heard after the restart; SUCCESS rate back to 90 % ($back/s) $ratet after the restart; load $(cut -d' ' -f1-3 /proc/loadavg)"
