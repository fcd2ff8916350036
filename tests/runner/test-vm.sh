#!/bin/bash
# SPDX-License-Identifier: MIT
# Tests of scripts/vm.sh itself (KTAP): it runs a host-built program and
# returns its exit status, a program built against libspyre with
# scripts/cc.sh runs on the card, and a run whose guest crashes, hangs, or
# logs a WARN fails.  Assumes scripts/build.sh ran.
. "$(dirname "$0")/../../scripts/lib.sh"
kernel_env
VM=$SPYRE_ROOT/scripts/vm.sh
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
n=0 pass=0 fail=0
check() {	# check NAME EXPECTED_RC GREP_PATTERN -- vm.sh args
	local name=$1 want=$2 pat=$3 rc=0
	shift 4
	n=$((n + 1))
	"$VM" run --no-build "$@" >"$W/out" 2>&1 || rc=$?
	if [ "$rc" = "$want" ] && grep -Eq "$pat" "$W/out"; then
		echo "ok $n $name"
		pass=$((pass + 1))
	else
		echo "not ok $n $name (exit $rc, want $want; /$pat/)"
		sed 's/^/# /' "$W/out" | tail -20
		fail=$((fail + 1))
	fi
}
echo "TAP version 13"
echo "1..6"
cat >"$W/prog.c" <<'EOC'
#include <stdio.h>
int main(int argc, char **argv)
{
	printf("prog ran with %d args: %s\n", argc - 1, argv[1]);
	return 42;
}
EOC
gcc -O2 -o "$W/prog" "$W/prog.c"
check "program output and exit status" 42 'prog ran with 1 args: hello world' -- \
	--copy "$W/prog" -- ./prog "hello world"
cat >"$W/lib.c" <<'EOC'
#include <stdio.h>
#include <spyre/spyre.h>
#include <spyre/drm/spyre_accel.h>
int main(void)
{
	struct spyre_device_info info;
	struct spyre_device *dev;
	int ret = spyre_device_open(0, &dev);

	if (!ret)
		ret = spyre_device_get_info(dev, &info);
	if (ret) {
		printf("libspyre: %s\n", spyre_strerror(ret));
		return 1;
	}
	printf("card with %u cores, SUBMIT ioctl %#lx\n", info.num_cores,
	       (unsigned long)DRM_IOCTL_SPYRE_SUBMIT);
	spyre_device_close(dev);
	return 0;
}
EOC
"$SPYRE_ROOT/scripts/cc.sh" -std=c11 -Wall -Wextra -Werror -o "$W/lib" \
	"$W/lib.c"
check "a libspyre program built with scripts/cc.sh" 0 \
	'card with [0-9]+ cores, SUBMIT ioctl 0x' -- --copy "$W/lib" -- ./lib
check "unprivileged user in the accel group" 0 'uid=1000.*accel' -- \
	-- sh -c 'id; test -r /dev/accel/accel0 && test -w /dev/accel/accel0'
check "kernel crash fails the run" 125 'guest stopped before the command' -- \
	--root -- sh -c 'echo c > /proc/sysrq-trigger'
# (vm.sh stretches every timeout by SPYRE_SLOWDOWN on the debug kernel)
check "hung guest is stopped at the timeout" 124 \
	"timed out after $((15 * SPYRE_SLOWDOWN))s" -- --timeout 15 -- sleep 600
# built in the cache, as spyre.ko is (Kbuild writes next to its sources)
mkdir -p "$SPYRE_BUILD/warn-module"
cp -p "$SPYRE_ROOT/tests/runner/Kbuild" "$SPYRE_ROOT/tests/runner/warn_on_load.c" \
	"$SPYRE_BUILD/warn-module/"
make -s -C "$KDIR" M="$SPYRE_BUILD/warn-module" modules >/dev/null
check "a WARN in dmesg fails the run" 126 'deliberate warning' -- \
	--root --copy "$SPYRE_BUILD/warn-module/warn_on_load.ko" -- insmod ./warn_on_load.ko
echo "# Totals: pass:$pass fail:$fail xfail:0 xpass:0 skip:0 error:0"
[ $fail = 0 ]
