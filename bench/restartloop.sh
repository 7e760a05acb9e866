#!/bin/bash
# restartloop.sh DIR ROUNDS BIN...: starts each ax-controller binary in turn on the kept store DIR
# (bench/pending -keep; its ctl.yaml), ROUNDS times; prints the time to /readyz, and RSS, peak RSS
# and CPU seconds 30 s after ready. The binaries must not run the store at the same time.
#
# KILL=1: each process instead gets one job create 10 s after ready and is then killed with
# SIGKILL, so that every start after the first (a warm-up, not printed) finds the embedded
# server's stream state behind its blocks (it rebuilds the streams) and a dead process's write
# mark (its reload checks the records written after it); printed: time to /readyz, CPU seconds
# and peak RSS at ready.
set -u
d=$1; rounds=$2; shift 2
api=$(grep listen $d/ctl.yaml | awk '{print $2}')
kill_one() {
  local bin=$1 print=$2
  t0=$(date +%s.%N)
  $bin serve --config $d/ctl.yaml > "$d/restartloop.log" 2>&1 &
  pid=$!
  until curl -sf -o /dev/null http://$api/readyz; do sleep 0.05; done
  t1=$(date +%s.%N)
  cpu=$(awk '{print ($14+$15)/100}' /proc/$pid/stat)
  hwm=$(awk '/VmHWM/{print int($2/1024)}' /proc/$pid/status)
  sleep 10
  curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' http://$api/v1/jobs \
    -d '{"name":"restartloop","handler":"exec","payload":{"command":"/bin/true"},"schedule":{"delay":"30m"},"target":{"agent":"bench-1"}}' ||
    echo "restartloop: the create failed" >&2
  sleep 1
  kill -KILL $pid; wait $pid 2>/dev/null
  if [ "$print" = 1 ]; then
    printf "%s ready %.2fs cpu-at-ready %ss hwm-at-ready %s MiB\n" "$(basename $(dirname $bin))/$(basename $bin)" "$(echo "$t1 - $t0" | bc)" "$cpu" "$hwm"
  fi
}
if [ "${KILL:-0}" = 1 ]; then
  kill_one "$1" 0
  for r in $(seq 1 $rounds); do
    for bin in "$@"; do kill_one "$bin" 1; done
  done
  exit 0
fi
for r in $(seq 1 $rounds); do
  for bin in "$@"; do
    t0=$(date +%s.%N)
    $bin serve --config $d/ctl.yaml > "$d/restartloop.log" 2>&1 &
    pid=$!
    until curl -sf -o /dev/null http://$api/readyz; do sleep 0.05; done
    t1=$(date +%s.%N)
    sleep 30
    hwm=$(awk '/VmHWM/{print int($2/1024)}' /proc/$pid/status); rss=$(awk '/VmRSS/{print int($2/1024)}' /proc/$pid/status)
    cpu=$(awk '{print ($14+$15)/100}' /proc/$pid/stat)
    kill -TERM $pid; wait $pid
    printf "%s ready %.2fs rss+30s %s MiB hwm %s MiB cpu %ss\n" "$(basename $bin)" "$(echo "$t1 - $t0" | bc)" "$rss" "$hwm" "$cpu"
  done
done
