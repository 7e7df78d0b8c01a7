#!/usr/bin/env bash
# Builds tpuc on an accelerator machine whose Python already has a PJRT
# plugin installed (no network needed: no venv, no pip), then runs the demo,
# the C tests and the runtime benchmark there, and, where that Python has
# torch, the Python tests and the device and eager-mode benchmarks. Results
# go to $OUT (default /tmp/tpuc-device-out): demo.log, ctest.log,
# runtime.json, pytest.log, device.json, eager_modes.json (+ .png),
# compile.json (+ .png).
#
#   scripts/device_check.sh [PART ...]
#
# PART is any of: demo ctest runtime pytest device eager compile (default:
# all, in that order; the build always runs). A lent machine's time is
# short: e.g. `scripts/device_check.sh eager` builds and runs only the
# eager-mode benchmark (`bench_eager.py --quick`; $TPUC_DEVICE_EAGER_ARGS
# replaces --quick); `compile` runs `bench_compile.py --quick
# --no-first-call` ($TPUC_DEVICE_COMPILE_ARGS replaces those).
# The C tests were written for the CPU plugin; on another platform the few
# that assert CPU specifics (platform name, device count option) fail and are
# reported, not hidden.
set -uo pipefail
PARTS=("$@")
[[ ${#PARTS[@]} -eq 0 ]] && PARTS=(demo ctest runtime pytest device eager compile)
for p in "${PARTS[@]}"; do
  case "$p" in
    demo | ctest | runtime | pytest | device | eager | compile) ;;
    *) echo "device_check: unknown part '$p' (demo ctest runtime pytest device eager compile)" >&2
       exit 2 ;;
  esac
done
want() { [[ " ${PARTS[*]} " == *" $1 "* ]]; }
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-/tmp/tpuc-device-out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
export TPUC_SITE_PACKAGES="$SITE"
nvidia-smi -L 2>/dev/null || true
ls "$SITE" | grep -iE '^(jax|libtpu|xla)' || true
if ! { cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DTPUC_SITE_PACKAGES="$SITE" -DTPUC_PYTHON="$(command -v "$PY")" &&
       cmake --build build-device -j "$(nproc)"; } \
       >"$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  exit 1
fi
if want demo; then ./build-device/tpuc_demo 2>&1 | tee "$OUT/demo.log"; fi
if want ctest; then
  (cd build-device && ctest --output-on-failure --timeout 300) >"$OUT/ctest.log" 2>&1
  grep -E "tests passed|Failed|\*\*\*" "$OUT/ctest.log" || true
fi
if want runtime; then TPUC_BENCH_RESULTS_DIR="$OUT" ./build-device/bench_runtime; fi
if ls python/tpuc/_C*.so >/dev/null 2>&1; then
  if ! "$PY" -m pip install -q --no-deps --no-build-isolation -e . \
       >"$OUT/pip.log" 2>&1; then
    # No usable build backend offline: register the package by hand (a .pth
    # for the path, a dist-info for the torch.backends entry point).
    d="$SITE/tpuc-0.1.0.dist-info"
    mkdir -p "$d"
    printf 'Metadata-Version: 2.1\nName: tpuc\nVersion: 0.1.0\n' >"$d/METADATA"
    printf '[torch.backends]\ntpuc = tpuc:_autoload\n' >"$d/entry_points.txt"
    echo "$PWD/python" >"$SITE/tpuc-dev.pth"
  fi
  if want pytest; then
    "$PY" -m pytest tests/python -q -p no:cacheprovider >"$OUT/pytest.log" 2>&1
    tail -15 "$OUT/pytest.log"
  fi
  if want device; then TPUC_BENCH_RESULTS_DIR="$OUT" "$PY" bench/bench_device.py; fi
  if want eager && ! "$PY" -c "import transformers" 2>/dev/null; then
    echo "device_check: eager skipped: $PY cannot import transformers (the" \
      "benchmark builds its models with it)"
  elif want eager; then
    # shellcheck disable=SC2086  # the arguments are words on purpose
    TPUC_BENCH_RESULTS_DIR="$OUT" "$PY" bench/bench_eager.py \
      ${TPUC_DEVICE_EAGER_ARGS:---quick} 2>"$OUT/eager_modes.err"
    tail -5 "$OUT/eager_modes.err"
  fi
  if want compile && ! "$PY" -c "import transformers" 2>/dev/null; then
    echo "device_check: compile skipped: $PY cannot import transformers"
  elif want compile; then
    # shellcheck disable=SC2086  # the arguments are words on purpose
    TPUC_BENCH_RESULTS_DIR="$OUT" "$PY" bench/bench_compile.py \
      ${TPUC_DEVICE_COMPILE_ARGS:---quick --no-first-call} 2>"$OUT/compile.err"
    tail -5 "$OUT/compile.err"
  fi
elif want pytest || want device || want eager || want compile; then
  echo "device_check: no python/tpuc/_C*.so was built (no torch for $PY?):" \
    "pytest, device, eager and compile are skipped"
fi
