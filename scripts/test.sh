#!/usr/bin/env bash
# The whole test suite on a fresh machine: set-up, C++ unit tests (CTest), Python tests (pytest),
# the docs site in strict mode, a fixed-budget fuzz run and the ASan + UBSan run (scripts/sanitize.sh).
# Any failure, and pytest's "no tests ran" (exit 5), fails the script.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
bash scripts/setup.sh

echo "== C++ unit tests (GoogleTest via CTest)"
.venv/bin/cmake -S . -B build/cpp-tests -G Ninja -DCMAKE_MAKE_PROGRAM="$PWD/.venv/bin/ninja" \
  -DEXAMPLE_NPU_BUILD_TESTS=ON -DPython_EXECUTABLE="$PWD/.venv/bin/python" >/dev/null
.venv/bin/cmake --build build/cpp-tests -j2
(cd build/cpp-tests && ../../.venv/bin/ctest --output-on-failure -j2)

echo "== Lint (ruff)"
.venv/bin/ruff check .

echo "== Python tests (pytest)"
.venv/bin/python -m pytest tests/python -q -rs "$@"

echo "== Docs site (Sphinx + MyST, strict: any warning, broken link or page missing from the nav fails)"
rm -rf build/docs
.venv/bin/sphinx-build -W --keep-going -n -q -b html docs build/docs/html

echo "== Fuzzing (tests/fuzz: fixed seed and budget; any crash, hang or wrong error fails)"
.venv/bin/python tests/fuzz/fuzz.py --seed 1 --inputs "${EXAMPLE_NPU_FUZZ_INPUTS:-4000}" \
  --budget "${EXAMPLE_NPU_FUZZ_BUDGET:-600}"

bash scripts/sanitize.sh
