#!/usr/bin/env bash
# scripts/cross-build.sh — static, stripped, version-stamped release binaries.
#
# Builds ax-agent and ax-controller for linux/amd64, linux/arm64, linux/arm
# (GOARM=7: Raspberry Pi 2/3/4 on a 32-bit OS) and linux/arm (GOARM=6: Pi Zero
# and Pi 1) into dist/, writes dist/SHA256SUMS and prints a size table.
#
#   CGO_ENABLED=0            no libc: one file runs on any Linux of that arch
#   -trimpath -ldflags -s -w no build paths, no symbol table or DWARF
#   -X main.version/commit/date   what `ax-agent version` prints
#
# Environment:
#   VERSION   default: git describe --tags --always --dirty (or "dev")
#   COMMIT    default: git rev-parse --short HEAD (or "none")
#   DATE      default: SOURCE_DATE_EPOCH, else now, as RFC 3339 UTC
#   DIST      output directory (default dist)
#   TARGETS   space-separated subset, e.g. "linux/arm64 linux/arm/7"
#   BINARIES  space-separated subset of "ax-agent ax-controller"
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo none)}
if [ -z "${DATE:-}" ]; then
	if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
		DATE=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
	else
		DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	fi
fi
DIST=${DIST:-dist}
TARGETS=${TARGETS:-linux/amd64 linux/arm64 linux/arm/7 linux/arm/6}
BINARIES=${BINARIES:-ax-agent ax-controller}

LDFLAGS="-s -w -X main.version=$VERSION -X main.commit=$COMMIT -X main.date=$DATE"

mkdir -p "$DIST"
built=()
for target in $TARGETS; do
	IFS=/ read -r goos goarch goarm <<<"$target"
	suffix=${goos}-${goarch}
	if [ "$goarch" = arm ]; then
		goarm=${goarm:-7}
		suffix=${suffix}v${goarm}
	elif [ -n "$goarm" ]; then
		echo "cross-build: $target: only linux/arm takes a GOARM version" >&2
		exit 2
	fi
	for bin in $BINARIES; do
		out=$DIST/${bin}-${suffix}
		echo "building $out"
		env CGO_ENABLED=0 GOOS="$goos" GOARCH="$goarch" ${goarm:+GOARM=$goarm} \
			go build -trimpath -ldflags "$LDFLAGS" -o "$out" "./cmd/$bin"
		built+=("$(basename "$out")")
	done
done

(cd "$DIST" && sha256sum "${built[@]}" >SHA256SUMS)

echo
echo "version $VERSION, commit $COMMIT, built $DATE"
printf '%-28s %12s %9s\n' FILE BYTES MiB
for f in "${built[@]}"; do
	size=$(wc -c <"$DIST/$f")
	printf '%-28s %12d %9.2f\n' "$f" "$size" "$(awk -v s="$size" 'BEGIN { print s / 1048576 }')"
done
echo
echo "checksums: $DIST/SHA256SUMS (verify with: cd $DIST && sha256sum -c SHA256SUMS)"
