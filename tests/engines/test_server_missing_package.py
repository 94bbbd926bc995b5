"""A `vllm:` engine whose environment lacks a package the model's architecture needs fails with one
line naming the package (issue 24), not only with vLLM's 80-line traceback.

The real case: vLLM imports the multimodal processors of a Qwen3.5 checkpoint from transformers even
when it is served language-model-only, and they import torchvision. The test starts the real vLLM CPU
build on a tiny Qwen3.5 checkpoint with a `torchvision` earlier on its PYTHONPATH that fails to import
as an absent one does (`ModuleNotFoundError: No module named 'torchvision'`).
"""
from __future__ import annotations

import pytest

from lab.engines import create_engine
from lab.engines.servers.missing import last_exception, missing_package
from lab.errors import EngineLoadError
from tests.engines.helpers_presets import vllm_test_env, save_qwen35
from tests.engines.test_vllm_cpu import vllm_processes


@pytest.mark.parametrize(
    "line, package",
    [
        ("(EngineCore pid=1) ModuleNotFoundError: No module named 'torchvision'", "torchvision"),
        ("ModuleNotFoundError: No module named 'torchvision.ops'", "torchvision"),
        ("ImportError: Qwen2VLImageProcessor requires the Torchvision library but it was not found in your "
         "environment. Check out the instructions on the installation page", "torchvision"),
        ("ModuleNotFoundError: No module named 'PIL'", "pillow"),
        ("INFO 11-26 [loader.py:12] Loading weights took 0.1 s", None),
        ("ValueError: Unsupported CPU attention configuration", None),
    ],
)
def test_the_package_a_log_names(line, package):
    assert missing_package(["INFO starting", line, "ERROR engine core failed"]) == package


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.timeout(1200)  # one vLLM start on a loaded 2-core machine: minutes
def test_vllm_without_torchvision_fails_in_one_line_naming_it(vllm_exe, tmp_path, monkeypatch):
    for key, value in vllm_test_env(vllm_exe, tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")  # the engine core's own process fails, as users see it
    folder = save_qwen35(tmp_path / "qwen35", positions=4096)
    shadow = tmp_path / "shadow" / "torchvision"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'torchvision'\", name='torchvision')\n")
    monkeypatch.setenv("PYTHONPATH", str(shadow.parent))  # the server's environment only: the lab imported already
    engine = create_engine(f"vllm:{folder}?preset=qwen35-2b-sft&max_model_len=4096&enforce_eager=true&kv_cache_gb=0.25"
                           "&name=no-torchvision&ready_timeout=1000")
    with pytest.raises(EngineLoadError) as err:
        engine.load()
    message = str(err.value)
    assert "lacks the package 'torchvision'" in message and "\n" not in message, message[:2000]
    assert "vLLM's own environment" in message and "Traceback" not in message
    engine.close()
    assert not vllm_processes(str(folder))


@pytest.mark.parametrize(
    "lines, reason",
    [
        (["Traceback (most recent call last):", '  File "x.py", line 1, in <module>',
          "OSError: Can't load image processor for '/m'. Check the path."], "OSError: Can't load image processor for '/m'. Check the path."),
        (["  raise initial_exception", "transformers.exceptions.SomethingError: bad config", "INFO shutting down"],
         "SomethingError: bad config"),
        (["INFO 11-26 loading", "WARNING slow"], None),
        (["ValueError: " + "x" * 400], "ValueError: " + "x" * 287 + "…"),
    ],
)
def test_the_reason_a_log_ends_its_traceback_with(lines, reason):
    assert last_exception(lines) == reason


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_transformers_serve_that_cannot_load_says_why_in_one_line(tmp_path, monkeypatch):
    """A multimodal checkpoint without its processor files (a tiny Gemma-4 as the tests build it): `transformers
    serve` exits loading its processor; the lab's error is one line with the reason from the server's log,
    not only "exit code 1" (the real Hub checkpoints carry those files)."""
    from tests.engines.helpers_presets import save_gemma4

    monkeypatch.setenv("LAB_LOG_DIR", str(tmp_path / "logs"))
    folder = save_gemma4(tmp_path / "gemma4", positions=8192)
    engine = create_engine(f"transformers-serve:{folder}?preset=gemma4-e4b-sft&device=cpu&name=ts-gemma4")
    with pytest.raises(EngineLoadError) as err:
        engine.load()
    message = str(err.value)
    assert "\n" not in message and "server stopped: exit code 1: OSError: Can't load feature extractor" in message
    assert f"(log {tmp_path / 'logs'}" in message
