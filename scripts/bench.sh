#!/usr/bin/env bash
# Per-op speed of the NPU emulator against TVM's LLVM build and PyTorch (CPU), as a table.
# Runs set-up, installs the pinned CPU PyTorch into .venv if missing, then the benchmark; extra
# arguments go to benchmarks/bench_ops.py (e.g. --no-fail, --only conv, --repeat 20).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
bash scripts/setup.sh
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  echo "bench: installing torch==2.13.0 (CPU) into .venv"
  .venv/bin/pip install -q torch==2.13.0
fi
.venv/bin/python benchmarks/bench_ops.py "$@"
