#!/bin/bash
# SPDX-License-Identifier: MIT
# Fuzz the card model: QEMU's generic-fuzz target (libFuzzer, ASan, UBSan;
# scripts/build-qemu.sh --fuzz) over the card's MMIO and DMA on a q35
# machine, for a bounded time.  The corpus is kept between runs under the
# cache; a crash, assert or sanitizer report stops the run with the
# reproducer in $SPYRE_BUILD/fuzz-card/ and a non-zero exit status (fix it
# with a qtest case).  Never part of make test: `make soak-fuzz-card`.
#
#   scripts/fuzz-card.sh [SECONDS]     default 300
. "$(dirname "$0")/lib.sh"

secs=${1:-300}
case $secs in
'' | *[!0-9]*) die "usage: $0 [SECONDS]" ;;
esac
bin=$("$SPYRE_ROOT/scripts/build-qemu.sh" --fuzz | tail -1)
[ -x "$bin" ] || die "no fuzzing build"
out=$SPYRE_BUILD/fuzz-card
corpus=$SPYRE_CACHE/fuzz-corpus/spyre
mkdir -p "$out" "$corpus"
msg "generic-fuzz over the card for $secs s (corpus $corpus)"
# A small card, so that one input reaches many of its registers and
# queues; workers=1 keeps runs close to reproducible.
export QEMU_FUZZ_ARGS="-M q35 -nodefaults -L $(dirname "$bin")/firmware \
-device spyre,mem-size=16M,queues=4,contexts=8,vectors=5,workers=1"
export QEMU_FUZZ_OBJECTS="spyre*"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
cd "$out"
"$bin" --fuzz-target=generic-fuzz -max_total_time="$secs" \
	-rss_limit_mb=4096 -timeout=30 -print_final_stats=1 \
	-artifact_prefix="$out/" "$corpus"
