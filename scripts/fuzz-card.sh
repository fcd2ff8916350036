#!/bin/bash
# SPDX-License-Identifier: MIT
# Fuzz the card model (libFuzzer, ASan, UBSan; scripts/build-qemu.sh
# --fuzz) for a bounded time, split between two targets:
#  - generic-fuzz, QEMU's own, over the card's MMIO and DMA on a q35
#    machine: registers, queue pages, reset ordering;
#  - spyre-cmds (qemu-device/tests/spyre-fuzz.c), which sets up page
#    tables, rings and command pages first, so that its inputs run jobs:
#    command streams, PTEs, register writes between jobs.
# Each target keeps its corpus between runs under the cache; spyre-cmds
# starts from seeds it writes itself (one valid job per command kind).  A
# crash, assert or sanitizer report stops the run with the reproducer in
# $SPYRE_BUILD/fuzz-card/ and a non-zero exit status (fix it with a qtest
# case).  Never part of make test: `make soak-fuzz-card`.
#
#   scripts/fuzz-card.sh [SECONDS]     default 300, half per target
. "$(dirname "$0")/lib.sh"

secs=${1:-300}
case $secs in
'' | *[!0-9]*) die "usage: $0 [SECONDS]" ;;
esac
bin=$("$SPYRE_ROOT/scripts/build-qemu.sh" --fuzz | tail -1)
[ -x "$bin" ] || die "no fuzzing build"
out=$SPYRE_BUILD/fuzz-card
mkdir -p "$out"
fw=$(dirname "$bin")/firmware
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
cd "$out"

# run TARGET SECONDS CORPUS...: libFuzzer, new inputs into the first corpus
run() {
	local target=$1 t=$2

	shift 2
	mkdir -p "$@"
	msg "$target over the card for $t s (corpus $1)"
	"$bin" --fuzz-target="$target" -max_total_time="$t" \
		-rss_limit_mb=4096 -timeout=30 -print_final_stats=1 \
		-artifact_prefix="$out/$target-" "$@"
}

# A small card, so that one input reaches many of its registers and
# queues; workers=1 keeps runs close to reproducible.
QEMU_FUZZ_ARGS="-M q35 -nodefaults -L $fw \
-device spyre,mem-size=16M,queues=4,contexts=8,vectors=5,workers=1" \
QEMU_FUZZ_OBJECTS="spyre*" \
	run generic-fuzz $((secs / 2)) "$SPYRE_CACHE/fuzz-corpus/spyre"

seeds=$out/spyre-cmds-seeds
rm -rf "$seeds"	# run() makes it again, empty
QEMU_FUZZ_ARGS="-L $fw" SPYRE_FUZZ_SEEDS=$seeds \
	run spyre-cmds $((secs - secs / 2)) \
	"$SPYRE_CACHE/fuzz-corpus/spyre-cmds" "$seeds"
