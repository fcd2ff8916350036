#!/bin/bash
# SPDX-License-Identifier: MIT
# The benchmark behind `make bench` (assumes scripts/build.sh ran):
#   1. on the host, natively: spyre-bench --host measures memcpy bandwidth,
#      the ceiling for the card's copies;
#   2. in a fresh guest with two cards: spyre-bench measures the BO life
#      cycle against memfd (same guest, same run) and the card's COPY
#      bandwidth between system, device and host memory, printed next to
#      the host ceiling.
# Usage: scripts/run-bench.sh [vm.sh options, e.g. --iommu] [-- spyre-bench
#        options]
# Timings are reported, never judged; the exit status only says whether
# the benchmark ran.
. "$(dirname "$0")/lib.sh"
B=$SPYRE_CACHE/build
VMOPTS=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	VMOPTS+=("$1")
	shift
done
[ "${1:-}" = -- ] && shift

HOSTBIN=$B/user/libspyre/spyre-bench
[ -x "$HOSTBIN" ] || die "no $HOSTBIN; run scripts/build.sh"
msg "host: memcpy ceiling ($(nproc) CPU(s), $(uname -m))"
host=$("$HOSTBIN" --host | sed -n 's/^host-memcpy-gbps //p')
[ -n "$host" ] || die "spyre-bench --host gave no figure"
echo "host memcpy: $host GB/s"
msg "guest: spyre-bench"
"$SPYRE_ROOT/scripts/vm.sh" run --no-build --cards 2 --timeout 600 \
	"${VMOPTS[@]}" -- spyre-bench --host-memcpy "$host" "$@"
