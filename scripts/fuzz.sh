#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/fuzz_*.c) into build-fuzz/ with clang and
# runs each for FUZZ_SECONDS seconds. Skips (exit 0) with a note when clang or
# libFuzzer is unavailable; fails when a target fails to build or finds a bug.
#
# Usage: scripts/fuzz.sh [TARGET...]   (default: every fuzz target)
# Environment: FUZZ_SECONDS (default 60), FUZZ_FLAGS (extra libFuzzer flags),
#   FUZZ_BUILD_DIR (default build-fuzz), JOBS (default 2).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

FUZZ_SECONDS="${FUZZ_SECONDS:-60}"
BUILD_DIR="${FUZZ_BUILD_DIR:-build-fuzz}"
CLANG="${FUZZ_CC:-clang}"

log() { printf 'fuzz: %s\n' "$*" >&2; }

if ! command -v "$CLANG" >/dev/null 2>&1; then
  log "SKIPPED: $CLANG not found"
  exit 0
fi
probe_dir="$(mktemp -d)"
trap 'rm -rf "$probe_dir"' EXIT
cat >"$probe_dir/probe.c" <<'EOF'
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)data;
  (void)size;
  return 0;
}
EOF
if ! "$CLANG" -fsanitize=fuzzer,address,undefined "$probe_dir/probe.c" \
     -o "$probe_dir/probe" >/dev/null 2>&1; then
  log "SKIPPED: $CLANG cannot build libFuzzer targets (libclang-rt-*-dev?)"
  exit 0
fi

scripts/setup.sh "$BUILD_DIR" -DTPUC_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug \
  "-DCMAKE_C_COMPILER=$(command -v "$CLANG")"

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  for src in fuzz/fuzz_*.c; do
    [[ -e "$src" ]] || continue
    targets+=("$(basename "$src" .c)")
  done
fi
if [[ ${#targets[@]} -eq 0 ]]; then
  log "no fuzz targets (fuzz/fuzz_*.c)"
  exit 0
fi

# Same sanitizer settings as the ctest runs (written by CMake).
# shellcheck source=/dev/null
source "$BUILD_DIR/tpuc_env.sh"

failed=()
for t in "${targets[@]}"; do
  corpus="$BUILD_DIR/corpus/$t"
  artifacts="$BUILD_DIR/artifacts/$t/"
  mkdir -p "$corpus" "$artifacts"
  dirs=("$corpus")  # new inputs go to the first (writable) dir
  if [[ -d "fuzz/corpus/$t" ]]; then dirs+=("fuzz/corpus/$t"); fi
  log "running $t for ${FUZZ_SECONDS}s"
  # shellcheck disable=SC2086
  if ! "$BUILD_DIR/$t" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 \
       -artifact_prefix="$artifacts" ${FUZZ_FLAGS:-} "${dirs[@]}"; then
    log "FAILED: $t (artifacts in $artifacts)"
    failed+=("$t")
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  log "failed targets: ${failed[*]}"
  exit 1
fi
log "all ${#targets[@]} target(s) passed"
