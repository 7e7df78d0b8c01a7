#!/usr/bin/env bash
# Sets up everything tpuc needs on a fresh Debian machine, then builds.
# Idempotent and quick (seconds) when nothing changed:
#   - Debian packages: installed only when missing (apt-get update only then)
#   - .venv: created only when missing
#   - requirements.txt: installed (pip --no-deps) only when its content
#     changed since the last successful install (stamp in .venv)
#   - CMake (Ninja): configured when the build dir or its settings are new,
#     then built (Ninja does nothing when nothing changed)
#
# Usage: scripts/setup.sh [BUILD_DIR [EXTRA_CMAKE_ARGS...]]
#   BUILD_DIR defaults to build. Examples:
#     scripts/setup.sh
#     scripts/setup.sh build-asan -DTPUC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
# Environment: PYTHON (default python3), JOBS (default 2),
#   TPUC_SETUP_NO_BUILD=1 (stop after the environment is ready).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BUILD_DIR="${1:-build}"
if [[ $# -gt 0 ]]; then shift; fi
JOBS="${JOBS:-2}"
PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv"

log() { printf 'setup: %s\n' "$*" >&2; }

# --- Debian packages ----------------------------------------------------------
missing=()
need_pkg() {  # need_pkg PACKAGE: queue PACKAGE unless dpkg says it's installed
  dpkg -s "$1" >/dev/null 2>&1 || missing+=("$1")
}
need_cmd() {  # need_cmd COMMAND PACKAGE: queue PACKAGE when COMMAND is absent
  command -v "$1" >/dev/null 2>&1 || need_pkg "$2"
}

if command -v dpkg >/dev/null 2>&1; then
  need_cmd cc gcc
  need_cmd make make
  need_cmd cmake cmake
  need_cmd ninja ninja-build
  need_cmd git git
  # Headless Chromium: the tests render tpuc check's HTML report.
  need_cmd chromium chromium
  # clang + compiler-rt: libFuzzer and clang's sanitizer runtimes.
  need_cmd clang clang
  if command -v clang >/dev/null 2>&1; then
    clang_major="$(clang -dumpversion | cut -d. -f1)"
    need_pkg "libclang-rt-${clang_major}-dev"
  else
    need_pkg libclang-rt-dev  # matches Debian's default clang
  fi
  # Python venv support when the interpreter lacks it (Debian's python3).
  if ! "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    need_pkg python3-venv
  fi

  if [[ ${#missing[@]} -gt 0 ]]; then
    log "installing Debian packages: ${missing[*]}"
    sudo_cmd=()
    if [[ $(id -u) -ne 0 ]]; then
      if command -v sudo >/dev/null 2>&1; then
        sudo_cmd=(sudo)
      else
        log "missing packages and not root (no sudo): ${missing[*]}"
        exit 1
      fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${sudo_cmd[@]}" apt-get update -q
    "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends \
      "${missing[@]}"
  fi
else
  log "no dpkg: skipping system packages (need cc, make, cmake, ninja)"
fi

# --- Python virtual environment -----------------------------------------------
if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi

stamp="$VENV/.requirements.sha256"
want="$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)"
have="$(cat "$stamp" 2>/dev/null || true)"
if [[ "$want" != "$have" ]]; then
  # torch's CUDA wheels and their nvidia libraries take about 6 GB once
  # installed. pip keeps every downloaded wheel of one call until that call
  # ends, and its cache would keep them again: the large ones go in one call
  # each, without the cache, so the disk holds at most one spare wheel. With
  # too little room, say so before pip fills the disk.
  need_mb=6500
  free_mb="$(df -Pm "$VENV" | awk 'NR == 2 { print $4 }')"
  # (Only for a venv without torch yet: an update installs what changed.)
  if ! compgen -G "$VENV/lib/python*/site-packages/torch" >/dev/null &&
     [[ -n "$free_mb" && "$free_mb" -lt "$need_mb" ]]; then
    log "only ${free_mb} MB free under $VENV; installing requirements.txt" \
        "needs about ${need_mb} MB (torch and its CUDA libraries)"
    exit 1
  fi
  log "installing requirements.txt into .venv (${free_mb} MB free)"
  while read -r big; do
    "$VENV/bin/python" -m pip install -q --no-cache-dir --no-deps "$big"
  done < <(grep -E '^(torch|triton|nvidia-|cuda-)[A-Za-z0-9_.-]*==' \
             requirements.txt)
  "$VENV/bin/python" -m pip install -q --no-cache-dir --no-deps \
    -r requirements.txt
  # The tpuc package itself, editable: its torch.backends entry point makes
  # `import torch` load the tpu device. The binding is built below, into
  # python/tpuc, so the editable install builds nothing (TPUC_TORCH=OFF).
  log "installing the tpuc package (editable) into .venv"
  "$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation \
    -Ccmake.define.TPUC_TORCH=OFF -e .
  printf '%s\n' "$want" >"$stamp"
fi

if [[ "${TPUC_SETUP_NO_BUILD:-0}" == 1 ]]; then
  exit 0
fi

# --- configure and build --------------------------------------------------------
site="$("$VENV/bin/python" -c \
  'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
cmake_args=(-G Ninja "-DTPUC_SITE_PACKAGES=$site"
            "-DTPUC_PYTHON=$VENV/bin/python" "$@")

# Configure when the build dir is new or its arguments changed; otherwise the
# build re-runs CMake itself when CMakeLists.txt or a globbed dir changes.
args_file="$BUILD_DIR/.setup-cmake-args"
args_now="$(printf '%s\n' "${CC:-}" "${cmake_args[@]}")"
if [[ ! -f "$BUILD_DIR/build.ninja" ]] ||
   [[ "$(cat "$args_file" 2>/dev/null || true)" != "$args_now" ]]; then
  log "configuring $BUILD_DIR"
  cmake -S "$ROOT" -B "$BUILD_DIR" "${cmake_args[@]}"
  printf '%s\n' "$args_now" >"$args_file"
fi

cmake --build "$BUILD_DIR" -j "$JOBS"
