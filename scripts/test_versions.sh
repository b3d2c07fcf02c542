#!/usr/bin/env bash
# Builds and tests torch_musa against several torch releases, one venv each,
# and prints a table: version, build, pytest passed/failed/skipped, OpInfo pass rate.
#
#   scripts/test_versions.sh [--core] [--no-opinfo] [VERSION ...]     (default: 2.13.0 2.14.1 2.15.0)
#
#   --core       run only tests/core and tests/inductor (CI's check of the newest torch)
#   --no-opinfo  skip the OpInfo sweep
# Each version gets a venv and a copy of this source tree under $TORCH_MUSA_VERSIONS_DIR
# (default build/versions), so their builds never overwrite the working tree's.
# Wheels pip downloads are kept in $TORCH_MUSA_WHEEL_CACHE (default ~/.cache/torch_musa/wheels).
# A torch above this machine's pip cap is installed with its pip configuration skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
DIR=${TORCH_MUSA_VERSIONS_DIR:-$ROOT/build/versions}
CACHE=${TORCH_MUSA_WHEEL_CACHE:-$HOME/.cache/torch_musa/wheels}
core=0
opinfo=1
versions=()
for a in "$@"; do
  case $a in
    --core) core=1 ;;
    --no-opinfo) opinfo=0 ;;
    *) versions+=("$a") ;;
  esac
done
[ ${#versions[@]} -eq 0 ] && versions=(2.13.0 2.14.1 2.15.0)
mkdir -p "$DIR" "$CACHE"
rows=()
status=0

for v in "${versions[@]}"; do
  venv=$DIR/venv-$v
  src=$DIR/src-$v
  log=$DIR/$v.log
  : >"$log"
  echo "== torch $v (log: $log) =="
  [ -x "$venv/bin/python" ] || $PY -m venv "$venv" >>"$log" 2>&1
  vpy=$venv/bin/python
  # The machine's local wheels first; a torch its pip configuration caps away comes from the
  # package index with that configuration skipped, through the wheel cache.
  pipx=()
  if ! $vpy -m pip install -q "torch==$v" numpy >>"$log" 2>&1; then
    pipx=(env PIP_CONFIG_FILE=/dev/null)
    ls "$CACHE"/torch-"$v"-*.whl >/dev/null 2>&1 ||
      "${pipx[@]}" $vpy -m pip download -q "torch==$v" numpy -d "$CACHE" >>"$log" 2>&1
    if ! "${pipx[@]}" $vpy -m pip install -q --find-links "$CACHE" "torch==$v" numpy >>"$log" 2>&1; then
      rows+=("$v|torch install failed|-|-"); status=1; continue
    fi
  fi
  "${pipx[@]}" $vpy -m pip install -q --find-links "$CACHE" "torch==$v" ninja cmake expecttest pytest pytest-timeout \
    libcst tqdm >>"$log" 2>&1
  # A private copy of the sources: the editable build lands in it, not in the working tree.
  mkdir -p "$src"
  find "$src" -mindepth 1 -maxdepth 1 ! -name build -exec rm -rf {} +  # (its build folder stays: incremental)
  tar -C "$ROOT" --exclude=./.git --exclude=./build --exclude='*.so' --exclude='*.egg-info' -cf - . | tar -C "$src" -xf -
  t0=$SECONDS
  if (cd "$src" && $vpy -m pip install -q --no-build-isolation --no-deps -e . >>"$log" 2>&1); then
    build="ok ($((SECONDS - t0)) s)"
  else
    grep -E "error" "$log" | head -20
    rows+=("$v|FAILED|-|-"); status=1; continue
  fi
  scope=(tests)
  # The core suite, and torch.compile's: Inductor internals change between releases.
  [ $core = 1 ] && scope=(tests/core tests/inductor)
  (cd "$src" && timeout 2400 $vpy -m pytest "${scope[@]}" -q -p no:cacheprovider --ignore=tests/ops/test_opinfo_sweep.py \
     >"$DIR/$v.pytest.log" 2>&1)
  summary=$(tail -1 "$DIR/$v.pytest.log")
  passed=$(grep -oE '[0-9]+ passed' <<<"$summary" | grep -oE '[0-9]+' || echo 0)
  failed=$(grep -oE '[0-9]+ (failed|errors?)' <<<"$summary" | awk '{n += $1} END {print n + 0}')
  skipped=$(grep -oE '[0-9]+ skipped' <<<"$summary" | grep -oE '[0-9]+' || echo 0)
  [ "${failed:-0}" != 0 ] && status=1
  rate=-
  if [ $opinfo = 1 ] && [ $core = 0 ]; then
    (cd "$src" && timeout 1800 $vpy -m tests.ops.opinfo_sweep >"$DIR/$v.opinfo.log" 2>&1)
    rate=$(grep -oiE 'pass rate[^0-9]*[0-9.]+%' "$DIR/$v.opinfo.log" | tail -1 | grep -oE '[0-9.]+%' || echo "?")
  fi
  rows+=("$v|$build|${passed:-0} / ${failed:-0} / ${skipped:-0}|$rate")
done

echo
printf '| %-8s | %-14s | %-26s | %-14s |\n' torch build "passed / failed / skipped" "OpInfo pass"
printf '| %-8s | %-14s | %-26s | %-14s |\n' -------- -------------- -------------------------- --------------
for r in "${rows[@]}"; do
  IFS='|' read -r a b c d <<<"$r"
  printf '| %-8s | %-14s | %-26s | %-14s |\n' "$a" "$b" "$c" "$d"
done
exit $status
