# The lab as a Hugging Face Docker Space.
#   CPU hardware (stored results, CPU engines):  docker build -t tb2lite-lab .
#   GPU hardware (managed vLLM engines):         docker build --build-arg VLLM=1 \
#                                                  --build-arg BASE=nvidia/cuda:13.0.1-runtime-ubuntu24.04 -t tb2lite-lab-gpu .
# The GPU build makes two environments: the lab's (/opt/venv, requirements.txt, CPU torch: the UI
# process never touches CUDA) and vLLM's (/opt/vllm, requirements-vllm.txt, vLLM's own CUDA 13
# torch 2.13). The lab starts `vllm serve` from the second one (LAB_VLLM).
ARG BASE=python:3.11-slim
FROM ${BASE}
ARG VLLM=0
# apt never asks (tzdata and friends would wait for an answer); an ARG, so it is not left in the runtime env
ARG DEBIAN_FRONTEND=noninteractive

RUN if ! command -v python3 >/dev/null; then \
      apt-get update && apt-get install -y --no-install-recommends python3 python3-pip python3-venv git \
      && rm -rf /var/lib/apt/lists/*; \
    fi
# vLLM's GPU kernels come from triton, which compiles a small C file at first use: it needs a C
# compiler and the Python headers, which --no-install-recommends images lack.
RUN if [ "$VLLM" = "1" ]; then \
      apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev python3-dev \
      && rm -rf /var/lib/apt/lists/*; \
    fi
RUN python3 -m venv /opt/venv
# The container serves on every interface (a Space's proxy, `docker run -p` reach it there), so it is a
# public deployment by default: visitors browse and compare, and cannot run Batch, sweeps or read paths
# (docs/security.md). The owner's own lab in a container is an explicit choice: `-e LAB_PUBLIC=0`.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    GRADIO_SERVER_NAME=0.0.0.0 \
    LAB_PUBLIC=1 \
    PORT=7860 \
    LAB_CACHE_DIR=/data/cache \
    HF_HOME=/data/hf \
    LAB_VLLM=/opt/vllm/bin/vllm

# Spaces run as uid 1000 with a writable /data when persistent storage is on; fall back to /tmp.
# Ubuntu 24.04 images (the CUDA base) already have `ubuntu` with uid 1000: take that uid over.
RUN if getent passwd 1000 >/dev/null; then userdel -r "$(getent passwd 1000 | cut -d: -f1)"; fi \
    && useradd -m -u 1000 user && mkdir -p /data && chown user /data
WORKDIR /home/user/app
# Layers from here on are ordered by how often they change: the requirements (rare) before the code
# (every commit), so a change to lab/ rebuilds only the cheap layers below `COPY . .`. Only the files the image
# installs from are copied here: a change to the tests' or the docs' requirements leaves the install layers cached.
# TORCH_INDEX: where the CPU torch wheel comes from (a mirror or PyPI where PyTorch's index is unreachable).
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
# Both are locks (scripts/lock.sh): every distribution pinned, so the image holds what the tests ran against.
COPY --chown=user requirements.txt requirements-vllm.txt ./
RUN pip install --no-cache-dir torch==2.13.0 --index-url "$TORCH_INDEX" \
    && pip install --no-cache-dir -r requirements.txt \
    && pip check
RUN if [ "$VLLM" = "1" ]; then \
      python3 -m venv /opt/vllm && /opt/vllm/bin/pip install --no-cache-dir -r requirements-vllm.txt; \
    fi
COPY --chown=user . .
# Bytecode compiled here, so a start writes none; temporary files (Gradio's, exports) go under /data, the
# one place besides the app's folder a Space writes to (with persistent storage mounted there and no tmp/ in
# it, Python falls back to /tmp).
RUN python -m compileall -q app.py lab && mkdir -p /data/tmp && chown user /data/tmp
# The replay file Compare needs, baked in at build time (default: the public file at its pinned commit).
# `python -m lab data download` checks it as it does any download: a size cap (and LAB_REPLAY_SIZE when
# given), LAB_REPLAY_SHA256 when given, and that every line is a replay record; a failed check fails the
# build. LAB_REPLAY_URL="" bakes nothing (the owner can set LAB_REPLAY, a path or URL, at start instead).
ARG LAB_REPLAY_URL=https://raw.githubusercontent.com/LLM-OS-Models/Terminal/e208c0181c86a002916e8ae4a08c820654c1a858/tb2_lite/data/replay_full.jsonl
ARG LAB_REPLAY_SHA256=""
ARG LAB_REPLAY_SIZE=""
RUN if [ -n "$LAB_REPLAY_URL" ]; then \
      python -m lab data download --out replay/replay_full.jsonl --quiet && chown -R user replay; \
    fi
ENV LAB_REPLAY=${LAB_REPLAY_URL:+/home/user/app/replay/replay_full.jsonl}
# Published per-step runs the owner wants visitors to see (series or run names separated by ';',
# or 'all'): fetched into results/published/ at build time. LAB_PUBLISHED set at start time (Space
# variable) fetches them on start instead; either way visitors just see them.
ARG LAB_PUBLISHED=""
ARG LAB_PUBLISHED_BASE_URL=""
RUN if [ -n "$LAB_PUBLISHED" ]; then \
      LAB_CACHE_DIR=/tmp/lab-cache python -m lab data published fetch --set "$LAB_PUBLISHED" --quiet \
      && rm -rf /tmp/lab-cache && chown -R user results; \
    fi
ENV TMPDIR=/data/tmp
USER user
EXPOSE 7860
CMD ["python", "app.py"]
