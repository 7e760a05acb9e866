#!/bin/sh
# gatewayctl.sh — a stand-in for a shop gateway's CLI, used by the ax demo
# (make demo). The gateway agent's exec.allow lists exactly this path.
#
#   gatewayctl.sh refresh-cache           refresh the local device cache
#   gatewayctl.sh close-order ORDER-ID    close an unpaid order; uses
#                                         AX_EXEC_ID as the idempotency key
set -eu

cmd=${1:-}
[ $# -gt 0 ] && shift

case "$cmd" in
refresh-cache)
	echo "device cache refreshed (exec ${AX_EXEC_ID:-?})"
	;;
close-order)
	[ $# -eq 1 ] || { echo "usage: gatewayctl.sh close-order ORDER-ID" >&2; exit 64; }
	echo "order $1 closed (idempotency key ${AX_EXEC_ID:-?})"
	;;
*)
	echo "usage: gatewayctl.sh refresh-cache|close-order ORDER-ID" >&2
	exit 64
	;;
esac
