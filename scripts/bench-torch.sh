#!/bin/bash
# SPDX-License-Identifier: MIT
# The PyTorch part of the benchmarks: boots the PyTorch guest image with two
# cards and runs torch_spyre/examples/bench_torch.py (per-token decode time
# eager vs torch.compile(backend="spyre"), the framework's cost over the same
# command lists launched from C++, eager dispatch cost on spyre vs CPU, and
# host->card copy bandwidth of tensor.to() vs libspyre's own copy), then,
# with a second card, bench_dist.py (a 16 MiB all_reduce over two cards vs
# gloo on CPU tensors).
# Extra arguments go to bench_torch.py.  Assumes scripts/build.sh ran.
# Figures are reported, never judged; the exit status says whether it ran.
set -e
ROOT=$(cd "$(dirname "$0")/.." && pwd)
EX="$ROOT/torch_spyre/examples"
exec "$ROOT/scripts/vm.sh" run --no-build --torch --cards 2 --timeout 900 \
	--copy "$EX/tiny_decoder.py" --copy "$EX/bench_torch.py" \
	--copy "$EX/bench_dist.py" -- \
	sh -c 'python3 bench_torch.py "$@" && python3 bench_dist.py' _ "$@"
