#!/usr/bin/env bash
# Set-up, then the main job on the embedded default model: partition, compile, run on the NPU
# emulator and compare with TVM's CPU build.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
bash scripts/setup.sh
.venv/bin/example-npu demo "$@"
