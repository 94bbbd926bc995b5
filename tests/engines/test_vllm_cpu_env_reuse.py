"""The vLLM environment of the tests (scripts/vllm_cpu_env.sh), as the README's test command meets it on
every run: one checked before from the same files is reused without running install.sh again, and its
sitecustomize (scripts/vllm_cpu/sitecustomize.py) reports AVX-512 and AMX absent without importing torch
into interpreters that do not use it. The real script and the real environment."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.paths import REPO

FEATURES = ("_is_avx512_supported", "_is_avx512_bf16_supported", "_is_avx512_vnni_supported",
            "_is_amx_tile_supported", "_is_amx_fp16_supported")


def env_script(vllm_exe: str, *args: str) -> subprocess.CompletedProcess:
    env_dir = Path(vllm_exe).parents[1]
    return subprocess.run(["bash", "scripts/vllm_cpu_env.sh", *args, str(env_dir)], cwd=REPO, capture_output=True,
                          text=True, timeout=900)


def test_an_environment_checked_before_is_reused_as_it_is(vllm_exe):
    first = env_script(vllm_exe)  # checks it if no check from these files is recorded yet
    assert first.returncode == 0 and first.stdout.strip() == vllm_exe, first.stderr[-2000:]
    again = env_script(vllm_exe)
    assert again.returncode == 0 and again.stdout.strip() == vllm_exe, again.stderr[-2000:]
    assert "checked before, made from the same files" in again.stderr and "install.sh" not in again.stderr
    stamp = Path(vllm_exe).parents[1] / "lab-checked.sha256"
    assert len(stamp.read_text().strip()) == 64


def environment_python(vllm_exe: str, code: str) -> str:
    done = subprocess.run([str(Path(vllm_exe).with_name("python")), "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_the_environment_starts_without_torch_and_torch_reports_avx2_only(vllm_exe):
    assert environment_python(vllm_exe, "import sys, sitecustomize; print('torch' in sys.modules)") == "False"
    report = environment_python(vllm_exe, f"""
import json, torch
print(json.dumps({{name: getattr(torch.cpu, name)() for name in {FEATURES!r} if hasattr(torch.cpu, name)}}))
print(torch.cpu.__loader__.get_filename("torch.cpu"))
print(sorted({{getattr(torch.cpu, name).__module__ for name in {FEATURES!r} if hasattr(torch.cpu, name)}}))
""").splitlines()
    features = json.loads(report[0])
    assert set(features) >= {"_is_avx512_supported", "_is_amx_tile_supported"}
    assert not any(features.values()), features
    assert report[1].endswith("torch/cpu/__init__.py")  # torch.cpu's own loader still answers through the wrapper
    assert report[2] == "['sitecustomize']"  # the answers are the environment's, whatever this processor has
