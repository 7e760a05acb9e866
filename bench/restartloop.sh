#!/bin/bash
# restartloop.sh DIR ROUNDS BIN...: starts each ax-controller binary in turn on the kept store DIR
# (bench/pending -keep; its ctl.yaml), ROUNDS times; prints the time to /readyz, and RSS, peak RSS
# and CPU seconds 30 s after ready. The binaries must not run the store at the same time.
set -u
d=$1; rounds=$2; shift 2
api=$(grep listen $d/ctl.yaml | awk '{print $2}')
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
