#!/usr/bin/env bash
# scripts/package.sh — .deb and .rpm packages of ax-agent and ax-controller.
#
# Runs scripts/cross-build.sh for the targets, then nfpm (pinned in
# packaging/go.mod, run with `go tool`) once per binary, target and format,
# and writes dist/SHA256SUMS over the binaries and the packages.
#
#   target        nfpm arch  .deb (Architecture)          .rpm
#   linux/amd64   amd64      NAME_V-1_amd64.deb            NAME-V-1.x86_64.rpm
#   linux/arm64   arm64      NAME_V-1_arm64.deb            NAME-V-1.aarch64.rpm
#   linux/arm/7   arm7       NAME_V-1_armhf.deb            NAME-V-1.armv7hl.rpm
#   linux/arm/6   arm6       NAME_V-1_armv6hf.deb (armhf)  NAME-V-1.armv6hl.rpm
#
# The ARMv6 build (Pi Zero, Pi 1 on Raspberry Pi OS) is an armhf package too;
# its file name keeps it apart from the ARMv7 one.
#
# Each package: /usr/bin/NAME, the unit of configs/systemd as
# /usr/lib/systemd/system/NAME.service, /etc/ax/NAME.yaml (conffile, root:ax
# 0640) and its pristine copy /usr/share/ax/NAME.yaml, /var/lib/ax/NAME
# (ax:ax 0700), maintainer scripts from packaging/scripts (user ax, enable
# without start, purge), and for ax-controller the bash/zsh/fish completions.
#
# Environment (besides cross-build.sh's VERSION, COMMIT, DATE, DIST):
#   TARGETS      default "linux/amd64 linux/arm64 linux/arm/7 linux/arm/6"
#   BINARIES     default "ax-agent ax-controller"
#   FORMATS      default "deb rpm"
#   PKG_VERSION  package version; default derived from VERSION (see pkg_version)
#   MAINTAINER   default "ax developers <dev@axsched.invalid>"
#   PKG_COMPRESSION  xz (default: smallest, read by every dpkg and rpm), gzip
#                or zstd (much faster to build; zstd .debs need dpkg >= 1.21.18)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

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
FORMATS=${FORMATS:-deb rpm}
PKG_COMPRESSION=${PKG_COMPRESSION:-xz}
MAINTAINER=${MAINTAINER:-ax developers <dev@axsched.invalid>}
export VERSION COMMIT DATE DIST TARGETS BINARIES

# pkg_version VERSION: a version dpkg and rpm both order right.
#   v1.2.3                 1.2.3
#   v1.2.3-4-gabc1234      1.2.3+4.gabc1234   (after 1.2.3)
#   v1.3.0-rc.1            1.3.0~rc.1         (before 1.3.0)
#   3e806a5, dev (no tag)  0.0.0~git.3e806a5  (before any release)
#   ...-dirty              ....dirty
pkg_version() {
	local v=${1#v} base rest dirty=""
	if [[ $v == *-dirty ]]; then
		v=${v%-dirty}
		dirty=.dirty
	fi
	if [[ $v =~ ^([0-9]+\.[0-9]+(\.[0-9]+)?)(.*)$ ]]; then
		base=${BASH_REMATCH[1]}
		rest=${BASH_REMATCH[3]}
		if [[ $rest =~ ^-([0-9]+)-g([0-9a-f]+)$ ]]; then
			rest="+${BASH_REMATCH[1]}.g${BASH_REMATCH[2]}"
		elif [[ $rest == -* ]]; then
			rest="~${rest#-}"
		fi
	else
		base=0.0.0
		rest="~git.$v"
	fi
	rest=${rest//-/.}
	rest=${rest//[^A-Za-z0-9.+~]/.}
	printf '%s%s%s\n' "$base" "$rest" "$dirty"
}
PKG_VERSION=${PKG_VERSION:-$(pkg_version "$VERSION")}
PKG_RELEASE=1
if ! [[ $PKG_VERSION =~ ^[0-9][A-Za-z0-9.+~]*$ ]]; then
	echo "package: PKG_VERSION '$PKG_VERSION' must start with a digit and hold only letters, digits, '.', '+' and '~'" >&2
	exit 2
fi
case $PKG_COMPRESSION in xz | gzip | zstd) ;; *)
	echo "package: PKG_COMPRESSION: '$PKG_COMPRESSION' is not xz, gzip or zstd" >&2
	exit 2
	;;
esac
for f in $FORMATS; do
	case $f in deb | rpm) ;; *)
		echo "package: FORMATS: unknown format '$f' (deb, rpm)" >&2
		exit 2
		;;
	esac
done

# 1. Binaries (and their SHA256SUMS, rewritten below).
bash scripts/cross-build.sh
mkdir -p "$DIST"
DIST=$(cd "$DIST" && pwd)

# 2. A stage directory per binary.
STAGE=$(mktemp -d "${TMPDIR:-/tmp}/ax-package.XXXXXX")
trap '[ -n "${KEEP_STAGE:-}" ] || rm -rf "$STAGE"' EXIT

# 3. nfpm, pinned in packaging/go.mod (kept out of the product's go.mod).
# `go tool` would run it in packaging/, not in the stage directory its
# config's relative paths need: run it once so that the Go build cache
# holds it, then take the cached binary (`go tool -n` prints its path).
go -C "$ROOT/packaging" tool nfpm --version >/dev/null
NFPM=$(go -C "$ROOT/packaging" tool -n nfpm)
if [ ! -x "$NFPM" ]; then
	go -C "$ROOT/packaging" build -o "$STAGE/nfpm" github.com/goreleaser/nfpm/v2/cmd/nfpm
	NFPM=$STAGE/nfpm
fi

# suffix TARGET: the file suffix of cross-build.sh (linux-armv7).
suffix() {
	local goos goarch goarm
	IFS=/ read -r goos goarch goarm <<<"$1"
	if [ "$goarch" = arm ]; then
		echo "${goos}-${goarch}v${goarm:-7}"
	else
		echo "${goos}-${goarch}"
	fi
}

# A binary that runs here, for the completion scripts: the one just built
# if this machine's target is among TARGETS, else a new one.
host_controller() {
	local arch
	arch=$(go env GOARCH)
	if [[ " $TARGETS " == *" linux/$arch "* ]] && "$DIST/ax-controller-linux-$arch" version >/dev/null 2>&1; then
		echo "$DIST/ax-controller-linux-$arch"
		return
	fi
	CGO_ENABLED=0 go build -trimpath -o "$STAGE/ax-controller.host" ./cmd/ax-controller
	echo "$STAGE/ax-controller.host"
}

# 4. What the packages hold besides the binary.
changelog_date=$(date -u -R -d "$DATE")
for bin in $BINARIES; do
	s=$STAGE/$bin
	mkdir -p "$s/scripts/deb" "$s/scripts/rpm" "$s/completions"
	cp "configs/systemd/$bin.service" "$s/$bin.service"
	case $bin in
	ax-agent)
		cp packaging/ax-agent.yaml "$s/ax-agent.yaml"
		hint="set id and nats.url"
		check=run
		;;
	ax-controller)
		# The documented defaults of configs/ax-controller.yaml, with the
		# package's data directory.
		sed -e 's#^data_dir: ax-data$#data_dir: /var/lib/ax/ax-controller#' \
			-e '1s#^.*$#\# /etc/ax/ax-controller.yaml: ax-controller configuration (package default; the service starts once it differs from /usr/share/ax/ax-controller.yaml).#' \
			configs/ax-controller.yaml >"$s/ax-controller.yaml"
		grep -q '^data_dir: /var/lib/ax/ax-controller$' "$s/ax-controller.yaml" || {
			echo "package: configs/ax-controller.yaml has no 'data_dir: ax-data' line to replace" >&2
			exit 1
		}
		hint="node, api.listen and api.tokens, nats"
		check=serve
		ctl=$(host_controller)
		"$ctl" completion bash >"$s/completions/ax-controller.bash"
		"$ctl" completion zsh >"$s/completions/_ax-controller"
		"$ctl" completion fish >"$s/completions/ax-controller.fish"
		;;
	*)
		echo "package: BINARIES: unknown binary '$bin'" >&2
		exit 2
		;;
	esac
	for f in packaging/scripts/deb/* packaging/scripts/rpm/*; do
		sed -e "s#@NAME@#$bin#g" -e "s#@HINT@#$hint#g" -e "s#@CHECK@#$check#g" "$f" >"$s/${f#packaging/}"
	done
	chmod 0755 "$s"/scripts/deb/*
	sed "s/^  compression: xz$/  compression: $PKG_COMPRESSION/" "packaging/$bin.nfpm.yaml" >"$s/nfpm.yaml"
	cp packaging/copyright "$s/copyright"
	sed -e "s#@NAME@#$bin#g" packaging/lintian-overrides >"$s/lintian-overrides"
	printf '%s (%s-%s) unstable; urgency=medium\n\n  * Built from ax %s (commit %s).\n  * Changes: the git log of the ax repository.\n\n -- %s  %s\n' \
		"$bin" "$PKG_VERSION" "$PKG_RELEASE" "$VERSION" "$COMMIT" "$MAINTAINER" "$changelog_date" |
		gzip -9n >"$s/changelog.Debian.gz"
done

# 5. The packages.
built=()
for target in $TARGETS; do
	sfx=$(suffix "$target")
	case $sfx in
	linux-amd64) arch=amd64 deb=amd64 rpm=x86_64 ;;
	linux-arm64) arch=arm64 deb=arm64 rpm=aarch64 ;;
	linux-armv7) arch=arm7 deb=armhf rpm=armv7hl ;;
	linux-armv6) arch=arm6 deb=armv6hf rpm=armv6hl ;;
	*)
		echo "package: no package architecture for target $target" >&2
		exit 2
		;;
	esac
	for bin in $BINARIES; do
		for fmt in $FORMATS; do
			if [ "$fmt" = deb ]; then
				out=${bin}_${PKG_VERSION}-${PKG_RELEASE}_${deb}.deb
			else
				out=${bin}-${PKG_VERSION}-${PKG_RELEASE}.${rpm}.rpm
			fi
			echo "packaging $DIST/$out"
			mkdir -p "$STAGE/$bin/bin"
			cp "$DIST/$bin-$sfx" "$STAGE/$bin/bin/$bin"
			(cd "$STAGE/$bin" && env AX_ARCH="$arch" AX_PKG_VERSION="$PKG_VERSION" AX_PKG_RELEASE="$PKG_RELEASE" \
				AX_MAINTAINER="$MAINTAINER" SOURCE_DATE_EPOCH="$(date -u -d "$DATE" +%s)" \
				"$NFPM" package --config "$STAGE/$bin/nfpm.yaml" --packager "$fmt" --target "$DIST/$out")
			built+=("$out")
		done
	done
done

# 6. Checksums of everything cross-build.sh and this script made.
binaries=()
for target in $TARGETS; do
	for bin in $BINARIES; do
		binaries+=("$bin-$(suffix "$target")")
	done
done
(cd "$DIST" && sha256sum "${binaries[@]}" "${built[@]}" >SHA256SUMS)

echo
echo "package version $PKG_VERSION-$PKG_RELEASE (ax $VERSION, commit $COMMIT)"
printf '%-48s %12s\n' PACKAGE BYTES
for f in "${built[@]}"; do
	printf '%-48s %12d\n' "$f" "$(wc -c <"$DIST/$f")"
done
echo
echo "checksums: $DIST/SHA256SUMS (verify with: cd $DIST && sha256sum -c SHA256SUMS)"
