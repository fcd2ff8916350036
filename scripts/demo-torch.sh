#!/bin/bash
# SPDX-License-Identifier: MIT
# `make demo-torch`: boots the PyTorch guest image with one card and runs
# torch_spyre/examples/demo_torch.py (a 2-layer decoder-only transformer
# generating tokens on device="spyre", eager and compiled with
# torch.compile(backend="spyre"), checked against the CPU; per-token times,
# command lists per token, ops on the card vs fallback, memory).
# Arguments go to demo_torch.py (--tokens N, --seed S).  Assumes
# scripts/build.sh ran (make demo-torch does it).
set -e
ROOT=$(cd "$(dirname "$0")/.." && pwd)
EX="$ROOT/torch_spyre/examples"
exec "$ROOT/scripts/vm.sh" run --no-build --torch --cards 1 --timeout 900 \
	--copy "$EX/tiny_decoder.py" --copy "$EX/demo_torch.py" -- \
	python3 demo_torch.py "$@"
