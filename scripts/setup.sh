#!/usr/bin/env bash
# Idempotent set-up on a fresh machine: Debian build dependencies, a git-ignored .venv with the
# pinned TVM, and example_npu built by CMake and installed into it. Safe to re-run.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."

missing=()
[ -f /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)
command -v g++ >/dev/null || missing+=(g++)
python3 -c "import venv, ensurepip" 2>/dev/null || missing+=(python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
export PIP_DISABLE_PIP_VERSION_CHECK=1
# pip prints a warning per package for this machine's optional local indexes; hide only those.
quiet_pip() {
  .venv/bin/pip install -q "$@" 2>&1 | { grep -v "is ignored: it is neither" || true; }
  return "${PIPESTATUS[0]}"
}
quiet_pip -r requirements-dev.txt
# --no-build-isolation reuses the pinned tvm-ffi above and the cached CMake tree in build/.
quiet_pip --no-build-isolation .
.venv/bin/python -c "import example_npu" || { echo "setup: example_npu failed to import"; exit 1; }
