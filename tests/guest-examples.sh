#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs in the guest (make test's guest-examples step, busybox sh): the
# examples/ programs twice, as the guest image installs them
# (/usr/libexec/spyre/examples, built by scripts/build.sh) and as
# tests/test-install.sh built them with pkg-config against a
# `make install DESTDIR=...` tree (copied to /work/examples), each checked
# against the values it must print.  TAP.
#   guest-examples.sh [DIR...]     default: both folders
[ $# -gt 0 ] || set -- /usr/libexec/spyre/examples /work/examples
n=0 failed=0
check() {	# check NAME OUTPUT-FILE EXPECTED-LINE-REGEX...
	name=$1 log=$2
	shift 2
	n=$((n + 1))
	ok=1
	for re in "$@"; do
		grep -Eq "$re" "$log" || { echo "# no line matching: $re"; ok=0; }
	done
	if [ $ok = 1 ]; then
		echo "ok $n $name"
	else
		sed 's/^/# /' "$log"
		echo "not ok $n $name"
		failed=$((failed + 1))
	fi
}
echo "TAP version 13"
echo "1..$(($# * 2))"
for d in "$@"; do
	"$d/hello" >/tmp/hello.log 2>&1
	echo "exit $?" >>/tmp/hello.log
	check "$d/hello" /tmp/hello.log \
		'^hello: libspyre [0-9]+\.[0-9]+\.[0-9]+, [1-9][0-9]* card\(s\)$' \
		'^hello: card 0 at [0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7] \(/dev/accel/accel[0-9]+\)$' \
		'^hello: card 0: [1-9][0-9]* cores, [1-9][0-9]* queues, [1-9][0-9]* MiB device memory, driver spyre [0-9]+\.[0-9]+$' \
		'^hello: card 0 filled 1024 words with 42 in device memory, read back 1024$' \
		'^exit 0$'
	"$d/stream" >/tmp/stream.log 2>&1
	echo "exit $?" >>/tmp/stream.log
	check "$d/stream" /tmp/stream.log \
		'^stream: 4096 values, half\[1\] = 1\.5, half\[4095\] = 6142\.5, 0 wrong$' \
		'^stream: event order ok, scale took [1-9][0-9]* ns of card time$' \
		'^exit 0$'
done
echo "# Totals: pass:$((n - failed)) fail:$failed xfail:0 xpass:0 skip:0 error:0"
[ $failed = 0 ]
