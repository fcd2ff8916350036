#!/bin/bash
# SPDX-License-Identifier: MIT
# Compile a program against this clone's libspyre, to run it in the guest
# with scripts/vm.sh run --copy:
#   scripts/cc.sh -o hello hello.c [more compiler arguments]
# Uses the headers, pkg-config file and library that scripts/build.sh
# stages for the guest (built first if missing); $CC if set, else cc.
. "$(dirname "$0")/lib.sh"
S=$SPYRE_BUILD/stage
if [ ! -f "$S/usr/lib/pkgconfig/spyre.pc" ]; then
	"$SPYRE_ROOT/scripts/build.sh" user >/dev/null
fi
flags=$(PKG_CONFIG_SYSROOT_DIR=$S PKG_CONFIG_PATH=$S/usr/lib/pkgconfig \
	pkg-config --cflags --libs spyre) || die "pkg-config spyre failed"
# libdrm (the host's, as in the guest) for <spyre/drm/spyre_accel.h>
drm=$(pkg-config --cflags --libs libdrm) || die "pkg-config libdrm failed"
# shellcheck disable=SC2086
exec ${CC:-cc} "$@" $flags $drm
