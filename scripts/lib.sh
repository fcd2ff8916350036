# SPDX-License-Identifier: MIT
# Common settings for the Spyre scripts.  Sourced, not run.
#
# Everything downloaded or built lives under $SPYRE_CACHE (outside the
# clone), keyed by versions and source hashes, so a second run is fast.

set -euo pipefail

SPYRE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SPYRE_CACHE=${SPYRE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/spyre}
# Build products of this clone: one folder per source tree, so two clones
# (or a clone that moved) never share objects, dependency files or images.
SPYRE_BUILD=$SPYRE_CACHE/build/$(printf '%s' "$SPYRE_ROOT" | sha256sum | cut -c1-12)
# The guest kernel: Debian's (default) or the debug build of the same
# source (SPYRE_KERNEL=debug, `make test KERNEL=debug`: KASAN, lockdep,
# kmemleak, fault injection; scripts/build-debug-kernel.sh), whose module
# and images live in a build folder of their own.
# SPYRE_SLOWDOWN: the factor every guest timeout stretches by on that
# kernel (SPYRE_DEBUG_SLOWDOWN, default 4: it runs 2-4x slower under TCG).
SPYRE_KERNEL=${SPYRE_KERNEL:-debian}
SPYRE_SLOWDOWN=1
case $SPYRE_KERNEL in
debian) ;;
debug) SPYRE_BUILD=$SPYRE_BUILD-debug
       SPYRE_SLOWDOWN=${SPYRE_DEBUG_SLOWDOWN:-4} ;;
*) printf 'error: SPYRE_KERNEL=%s: debian or debug\n' "$SPYRE_KERNEL" >&2
   exit 1 ;;
esac
export SPYRE_ROOT SPYRE_CACHE SPYRE_BUILD SPYRE_KERNEL

# The guest kernel: one exact version for image, headers, kbuild and
# source (bookworm-backports).  Override with SPYRE_KPKG if the archive
# moved on; scripts/setup.sh falls back to the newest consistent set.
SPYRE_KPKG_DEFAULT=6.12.95-1~bpo12+1
SPYRE_SEABIOS_PKG=1.16.3-2~bpo12+1

msg() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Run as root, through sudo when needed.
as_root() {
	if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# Resolved kernel versions (written by setup.sh).
kernel_env() {
	[ -f "$SPYRE_CACHE/kernel.env" ] ||
		die "kernel not set up; run scripts/setup.sh"
	# shellcheck disable=SC1091
	. "$SPYRE_CACHE/kernel.env"
	KROOT=$SPYRE_CACHE/kernel/$KPKG/root
	KDIR=$KROOT/usr/src/linux-headers-$KREL
	KSRC=$SPYRE_CACHE/ksrc/$KPKG/linux-source-6.12
	KIMAGE=$KROOT/boot/vmlinuz-$KREL
	KMODS=$KROOT/lib/modules/$KREL
	if [ "$SPYRE_KERNEL" = debug ]; then
		[ -f "$SPYRE_CACHE/debug-kernel/current/kernel.env" ] ||
			die "no debug kernel built: run make debug-kernel"
		# shellcheck disable=SC1091
		. "$SPYRE_CACHE/debug-kernel/current/kernel.env"
	fi
	export KPKG KABI KREL KROOT KDIR KSRC KIMAGE KMODS
}

# Hash of files (paths relative to SPYRE_ROOT), for cache keys.
tree_hash() {
	(cd "$SPYRE_ROOT" && find "$@" -type f ! -name '*.o' ! -name '*.ko' \
		-print0 2>/dev/null | LC_ALL=C sort -z | xargs -0 sha256sum |
		sha256sum | cut -c1-16)
}

# Kbuild of 6.12 writes objects next to the sources (M=), so the module
# builds in a copy of its sources (Kbuild, driver/, hw/, uapi/) in folder
# $1, refreshed by content: the clone stays clean and Kbuild still
# rebuilds only what changed.
sync_module_src() {
	local dst=$1
	mkdir -p "$dst"
	(cd "$SPYRE_ROOT" && rsync -r -c --delete --no-times \
		--filter='P *.o' --filter='P *.ko' --filter='P .*.cmd' \
		--filter='P *.mod*' --filter='P modules.order' \
		--filter='P Module.symvers' \
		--exclude='*.o' --exclude='*.ko' --exclude='.*.cmd' \
		--exclude='*.mod*' --exclude='modules.order' \
		--exclude='Module.symvers' \
		--include='/Kbuild' --include='/driver/***' --include='/hw/***' \
		--include='/uapi/***' --exclude='*' \
		./ "$dst/")
}
