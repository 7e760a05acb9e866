#!/bin/sh
# valvectl.sh — a stand-in for a valve controller's device CLI, used by the
# ax demo (make demo). A real device ships its own binary (for example
# /usr/local/bin/valvectl); the agent's exec.allow lists exactly that path.
#
# The ax exec handler runs it with a clean environment plus AX_JOB_ID,
# AX_EXEC_ID, AX_ATTEMPT and AX_SCHEDULED_AT.
#
#   valvectl.sh set --site S --mode M   push a control command (setpoint)
#   valvectl.sh fwcheck                 report the firmware version
#   valvectl.sh calibrate               fails on attempts 1 and 2 (exit 75,
#                                       EX_TEMPFAIL: retryable), succeeds on 3
set -eu

cmd=${1:-}
[ $# -gt 0 ] && shift
attempt=${AX_ATTEMPT:-1}

case "$cmd" in
set)
	echo "valve setpoint pushed: $* (exec ${AX_EXEC_ID:-?}, attempt $attempt)"
	;;
fwcheck)
	echo "firmware 4.2.1 ok on $(uname -n)"
	;;
calibrate)
	if [ "$attempt" -lt 3 ]; then
		echo "calibration sensor busy (attempt $attempt), try again" >&2
		exit 75
	fi
	echo "calibrated on attempt $attempt"
	;;
*)
	echo "usage: valvectl.sh set|fwcheck|calibrate [args]" >&2
	exit 64
	;;
esac
