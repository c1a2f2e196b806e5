#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer: the C++ unit tests, then a Python subset (end to
# end, errors, serialization, special values, fuzz regressions) and a short fuzz run against an
# instrumented build of the runtime library. Called by scripts/test.sh after scripts/setup.sh.
#
# Python loads the instrumented libexample_npu.so from a package overlay (build/sanitize/site,
# first on PYTHONPATH) over the normal install. CPython itself is not instrumented, so the ASan
# runtime is preloaded (it must come first), followed by libstdc++ (which CPython does not link:
# without it ASan cannot find the real __cxa_throw), and the leak check is off: the interpreter
# keeps its objects alive until exit by design.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
BUILD=build/sanitize
FUZZ_INPUTS="${EXAMPLE_NPU_SANITIZE_FUZZ_INPUTS:-600}"

echo "== Sanitizers: build (ASan + UBSan)"
.venv/bin/cmake -S . -B "$BUILD" -G Ninja -DCMAKE_MAKE_PROGRAM="$PWD/.venv/bin/ninja" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DEXAMPLE_NPU_SANITIZE=ON -DEXAMPLE_NPU_BUILD_TESTS=ON \
  -DPython_EXECUTABLE="$PWD/.venv/bin/python" >/dev/null
.venv/bin/cmake --build "$BUILD" -j2

export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:detect_stack_use_after_return=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

echo "== Sanitizers: C++ unit tests"
(cd "$BUILD" && ../../.venv/bin/ctest --output-on-failure -j2)

echo "== Sanitizers: Python subset"
SITE="$PWD/$BUILD/site"
rm -rf "$SITE" && mkdir -p "$SITE"
cp -r python/example_npu "$SITE/"
.venv/bin/cmake --install "$BUILD" --prefix "$SITE" >/dev/null
PRELOAD="$(g++ -print-file-name=libasan.so):$(g++ -print-file-name=libstdc++.so)"
run_instrumented() {
  LD_PRELOAD="$PRELOAD" PYTHONPATH="$SITE" "$@"
}
run_instrumented .venv/bin/python -c "import example_npu, sys; \
  sys.exit(0 if example_npu.__file__.startswith('$SITE') else 'not the instrumented package')"
run_instrumented .venv/bin/python -m pytest -q -p no:cacheprovider \
  tests/python/test_end_to_end.py tests/python/test_errors.py tests/python/test_serialization.py \
  tests/python/test_special_values.py tests/python/test_fuzz_regressions.py

echo "== Sanitizers: fuzz smoke run (${FUZZ_INPUTS} inputs, generated programs among them)"
# The seed corpus is built outside the instrumented run (the model exporters need nothing of
# it); ASan's shadow memory counts in the RSS, hence the larger limit. Model files are left to
# the normal run: their readers are Python and torch, which an instrumented run would only slow.
mkdir -p "$BUILD/fuzz"
.venv/bin/python tests/fuzz/corpus.py "$BUILD/fuzz/corpus.json" 2>"$BUILD/fuzz/corpus.log" ||
  { cat "$BUILD/fuzz/corpus.log"; exit 1; }
run_instrumented .venv/bin/python tests/fuzz/fuzz.py --inputs "$FUZZ_INPUTS" --budget 600 --seed 3 \
  --model-files 0 --corpus "$BUILD/fuzz/corpus.json" --out "$BUILD/fuzz" --max-rss-mb 12000 --timeout 60
