#!/bin/bash
# SPDX-License-Identifier: MIT
# PyTorch's own CPU kernels doing the work of the KERNEL figures of
# `make bench` ((x) row sum, (xi) softmax, (xiii) gather, (xiv) scatter,
# (xv) normal numbers; the same shapes and dtypes), natively on this host:
# the host's best code for that work, next to the memcpy the bars are set
# against (spyre-ceilings' memcpy on as many threads, measured right
# before).  The host has no PyTorch: this runs the torch image's python3
# (scripts/torch-image.sh) in a chroot of its tree, with /proc and /sys
# bound into it (PyTorch reads the CPU's features there) and unbound at
# exit; needs root (or sudo).  Reported, never judged; (ix) has no
# counterpart (eager PyTorch runs its 8 operations as 8 passes).
# Usage: scripts/host-torch-figures.sh [THREADS]   (default 2)
. "$(dirname "$0")/lib.sh"
THREADS=${1:-2}
[[ $THREADS =~ ^[1-9][0-9]*$ ]] || die "THREADS: a positive integer"
eval "$("$(dirname "$0")/torch-image.sh" image | grep '^TORCH_TREE=')"
[ -d "$TORCH_TREE/usr" ] || die "no torch image tree"
CEIL=$SPYRE_BUILD/ceilings/spyre-ceilings
[ -x "$CEIL" ] || die "no $CEIL: run make bench once"
GBPS=$("$CEIL" --threads "$THREADS" --reps 5 |
       awk -v k="memcpy-${THREADS}t" '$2 == k {print $3}')
[ -n "$GBPS" ] || die "spyre-ceilings gave no memcpy-${THREADS}t"

MOUNTED=()	# what this run bound (a mount already there is left alone)
cleanup() {
	for d in "${MOUNTED[@]}"; do
		as_root umount "$TORCH_TREE/$d"
	done
	as_root rm -f "$TORCH_TREE/tmp/host-torch-figures.py"
}
trap cleanup EXIT
for d in proc sys; do
	mountpoint -q "$TORCH_TREE/$d" && continue
	as_root mount --bind "/$d" "$TORCH_TREE/$d" || die "bind /$d"
	MOUNTED=("$d" "${MOUNTED[@]}")
done
as_root tee "$TORCH_TREE/tmp/host-torch-figures.py" >/dev/null <<'EOF'
import statistics, sys, time
import torch

threads, gbps = int(sys.argv[1]), float(sys.argv[2])
torch.set_num_threads(threads)
print(f"PyTorch {torch.__version__}, {threads} thread(s), "
      f"{torch.backends.cpu.get_cpu_capability()}; memcpy {gbps:.1f} GB/s")

def fig(name, nbytes, fn, reps=21):
    fn()
    t = []
    for _ in range(reps):
        s = time.perf_counter()
        fn()
        t.append((time.perf_counter() - s) * 1e6)
    ceil = nbytes / gbps / 1e3
    med = statistics.median(t)
    print(f"   {name:36s} {med:9.1f} [{min(t):.1f}-{max(t):.1f}] us; "
          f"memcpy of its bytes {ceil:8.1f} us -> {med / ceil:.2f}x")

x = torch.ones(1024, 4096, dtype=torch.float16)
y = torch.empty_like(x)
s = torch.empty(1024)
tbl = torch.randn(32768, 512).half()
idx = torch.randint(0, 32768, (128,))
rows = torch.empty(128, 512, dtype=torch.float16)
src = torch.randn(128, 512).half()
out = torch.empty(4 << 20)
gen = torch.Generator().manual_seed(1)
mib = 1 << 20
fig("(x) sum, 1024x4096 fp16 -> fp32", 8 * mib + 4096,
    lambda: torch.sum(x, -1, dtype=torch.float32, out=s))
fig("(xi) softmax, 1024x4096 fp16", 16 * mib,
    lambda: torch.softmax(x, -1, out=y))
fig("(xiii) index_select, 128 rows", 2 * 128 * 1024 + 128 * 8,
    lambda: torch.index_select(tbl, 0, idx, out=rows))
fig("(xiv) index_copy_, 128 rows", 2 * 128 * 1024 + 128 * 8,
    lambda: tbl.index_copy_(0, idx, src))
fig("(xv) normal_, 4 Mi fp32", 16 * mib,
    lambda: out.normal_(generator=gen))
EOF
as_root chroot "$TORCH_TREE" /usr/bin/python3 /tmp/host-torch-figures.py \
	"$THREADS" "$GBPS"
