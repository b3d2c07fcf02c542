#!/usr/bin/env bash
# Runs every test: the runtime's C++ tests (ctest) and the Python suites
# (tests/core, memory, ops, tools; the OpInfo sweep is in ops). Run scripts/setup.sh first.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
status=0

build_dir=$(ls -d build/py*-torch* 2>/dev/null | head -1)
if [ -n "$build_dir" ] && [ -f "$build_dir/runtime/runtime_tests" ]; then
  echo "== runtime C++ tests (ctest) =="
  ctest --test-dir "$build_dir" --output-on-failure 2>&1 | tail -3 || status=1
  ctest --test-dir "$build_dir" >/dev/null 2>&1 || status=1
else
  echo "== runtime C++ tests skipped: GoogleTest was not found at build time (apt-get install libgtest-dev) =="
fi

echo "== Python tests (pytest) =="
$PY -m pytest tests -q -p no:cacheprovider "$@" || status=1
exit $status
