#!/bin/bash
# SPDX-License-Identifier: MIT
# The benchmark behind `make bench` (assumes scripts/build.sh ran):
#   1. on the host, natively, the ceilings of the card's figures:
#      qemu-device/tests/spyre-ceilings (built here with the card model's
#      numeric core linked in) measures memcpy on 1 thread and on as many
#      threads as the card's copies use, OpenBLAS sgemm 512^3 and the same
#      GEMM per dtype through the card's math code on those threads, and
#      the per-call and per-element cost of every ELTWISE/REDUCE/ROWOP
#      kind through the card's math code, and spyre-demo's transformer
#      block (fp16 and scaled fp8, libspyre/tools/spyre-block.h) through
#      the card's math code on one thread; each a median [min-max] of
#      SPYRE_BENCH_REPS (default 5) repetitions;
#   2. in a fresh guest with two cards: `spyre-demo -b REPS` (the same
#      block on the card, checked, as one command list launched 20 times
#      in one submit: microseconds per block on the card's clock and the
#      wall clock, its "demo: figure" lines go to block.txt), then
#      spyre-bench, given those ceilings
#      (--ceilings), measures the BO life cycle against memfd and the
#      card's COPY bandwidth (memory), then job dispatch against a no-op
#      ioctl and an eventfd ping-pong, the latency of a high-priority job
#      under GEMM load, GEMM throughput per dtype, the cost of small
#      commands (execution) and kernels (KERNEL: a fused 8-op pointwise
#      expression over 4 Mi fp32, a 1024 x 4096 fp16 row sum and softmax,
#      each against the host's memcpy of its bytes on 2 threads from the
#      ceilings above, and an empty KERNEL against a NOP in a 1000-command
#      list; "n/a" on a card without KERNEL), each figure the median
#      [min-max] of as many
#      repetitions next to its floor or ceiling; it ends with a summary
#      table naming each ratio's clock (card or wall) and ceiling;
#   2b. scripts/bql-profile.py: a guest whose QEMU runs with its lock
#      profiler on, while the card runs ELTWISE, REDUCE and GEMM work on
#      four queues (spyre-bench --only load) for 10 s, 24 jobs a second
#      per queue (a load any of the card's models keeps up with, so their
#      figures compare): how long the vCPUs, the card's workers and the
#      device lock's users waited per second;
#   3. in the PyTorch guest: scripts/bench-torch.sh (per-token decode
#      eager vs compiled, framework cost, dispatch, tensor.to());
#   4. scripts/bench-report.py: $SPYRE_BUILD/bench/<time>/ (and
#      bench/latest) gets the text (bench.txt, torch.txt, block.txt),
#      bench.json (spyre-bench --json, the PyTorch figures, the block's
#      ratios to its native ceilings, goal <= 2x on the card clock, and the
#      host load, as numbers) and bench.png (every ratio against its goal).
# The guest part runs as the unprivileged user "spyre" (with CAP_SYS_NICE,
# through spyre-runas, for the high-priority queue of (iv)) with
# RLIMIT_MEMLOCK raised (the copy benchmark registers 2 x --size MiB of host memory,
# which the driver charges to that limit).
# Usage: scripts/run-bench.sh [vm.sh options, e.g. --iommu] [-- spyre-bench
#        options, e.g. --only exec]
# Timings are reported, never judged; the exit status only says whether
# the benchmark ran.
. "$(dirname "$0")/lib.sh"
B=$SPYRE_BUILD
REPS=${SPYRE_BENCH_REPS:-5}	# repetitions of every figure
VMOPTS=()
WORKERS=4	# the card's default "workers" property
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	VMOPTS+=("$1")
	if [ "$1" = --card-opts ] && [ $# -gt 1 ] &&
	   [[ ,$2, =~ ,workers=([0-9]+), ]]; then
		WORKERS=${BASH_REMATCH[1]}
	fi
	shift
done
[ "${1:-}" = -- ] && shift

# Figures taken while other guests run are noise: say what else ran.
load_note() {
	echo "host load $1: $(cut -d' ' -f1-3 /proc/loadavg)," \
	     "$(pgrep -c qemu-system || true) qemu-system process(es) running"
}
OUT=$B/bench/$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT" && ln -sfn "$OUT" "$B/bench/latest"
LOAD_BEFORE=$(load_note "before")
echo "$LOAD_BEFORE"

# The card's copies and GEMM parts run on min(workers, host CPUs) host
# threads: the native ceilings use as many.
[ "$WORKERS" -le "$(nproc)" ] || WORKERS=$(nproc)
msg "host: native ceilings ($WORKERS thread(s) of $(nproc) CPU(s), $(uname -m)), $REPS repetitions each"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/spyre-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
make -s -C "$SPYRE_ROOT/qemu-device/tests" -f Makefile.math ceilings \
	O="$B/ceilings" >"$TMP/cc.log" 2>&1 ||
	{ cat "$TMP/cc.log"; die "cannot build spyre-ceilings (libopenblas-dev?)"; }
echo "threads $WORKERS" >"$TMP/ceilings"
"$B/ceilings/spyre-ceilings" --threads "$WORKERS" --reps "$REPS" \
	>>"$TMP/ceilings" || die "spyre-ceilings failed"
awk '$1 == "ceiling" { printf "  %-24s %10.3f [%.3f-%.3f]\n", $2, $3, $4, $5 }' \
	"$TMP/ceilings"

msg "guest: spyre-demo -b $REPS, spyre-bench"
# both as "spyre" with CAP_SYS_NICE (spyre-runas: (iv) makes a
# high-priority queue); root raises the memlock limit for the benchmark
# (--json: the report on stderr, the JSON on stdout, kept in the guest's
# /tmp and printed on one line after "spyre-bench-json: ")
cmd=$(printf '%q ' spyre-bench --json --reps "$REPS" --ceilings /work/ceilings "$@")
# shellcheck disable=SC2016 # $0, $1 are expanded by the guest's shell
"$SPYRE_ROOT/scripts/vm.sh" run --no-build --cards 2 --timeout 900 \
	--copy "$TMP/ceilings" "${VMOPTS[@]}" --root -- sh -c \
	'spyre-runas sh -c "$1" || exit
	 ulimit -l unlimited && spyre-runas sh -c "$0 >/tmp/bench.json"
	 rc=$?; printf "spyre-bench-json: "; cat /tmp/bench.json; exit $rc' \
	"$cmd" "spyre-demo -b $REPS" | tee "$OUT/bench.txt"
rc=${PIPESTATUS[0]}
LOAD_AFTER=$(load_note "after (the guest's own QEMU counts until it exits)")
echo "$LOAD_AFTER"
[ "$rc" = 0 ] || exit "$rc"
sed -n 's/^spyre-bench-json: //p' "$OUT/bench.txt" >"$OUT/spyre-bench.json"
sed -n 's/^demo: figure //p' "$OUT/bench.txt" >"$OUT/block.txt"
# 2b. QEMU's lock profile while the card runs element-wise, reduction and
# GEMM work on four queues (how long vCPUs wait for the BQL)
msg "guest: lock profile under card load (scripts/bql-profile.py)"
"$SPYRE_ROOT/scripts/bql-profile.py" --seconds 10 --rate 24 \
	--json "$OUT/bql.json" \
	-- --no-build "${VMOPTS[@]}" >"$OUT/bql.txt" 2>&1
rc=$?
tail -n 1 "$OUT/bql.txt"
[ "$rc" = 0 ] || exit "$rc"
# 3. PyTorch: decode per token eager vs torch.compile, the framework's
# cost over the same command lists from C++, eager dispatch, tensor.to()
msg "guest: PyTorch (torch_spyre/examples/bench_torch.py)"
"$SPYRE_ROOT/scripts/bench-torch.sh" | tee "$OUT/torch.txt"
[ "${PIPESTATUS[0]}" = 0 ] || exit 1
python3 "$SPYRE_ROOT/scripts/bench-report.py" "$OUT" \
	--bench "$OUT/spyre-bench.json" --torch "$OUT/torch.txt" \
	--block "$OUT/block.txt" --bql "$OUT/bql.json" \
	--load-before "$LOAD_BEFORE" --load-after "$LOAD_AFTER"
