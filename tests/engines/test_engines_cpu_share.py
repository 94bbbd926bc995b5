"""An in-process `transformers:` engine on CPU uses every torch thread alone and its share of them while other
local CPU engines generate (a second in-process engine, a CPU server); engines count themselves only while
they generate. Real tiny engines; nothing here is timed."""
from __future__ import annotations

import pytest

from lab.data import load_replay
from lab.engines import cpu_share
from lab.engines.base import Request, Sampling
from lab.engines.registry import create_engine
from lab.engines.transformers_engine import _TORCH_THREADS
from tests.paths import EXCERPT

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


def _engine(model_dir, name: str):
    engine = create_engine(f"transformers:{model_dir}?device=cpu&batch_size=1&name={name}")
    engine.load()
    return engine


def _requests(n: int) -> list[Request]:
    step = load_replay(str(EXCERPT)).steps[0]
    return [Request(step=step, prompt=f"hello {i}") for i in range(n)]


def _all_threads() -> int:
    """Torch's threads before the lab changed them (what the engine read at its first generate)."""
    import torch

    return _TORCH_THREADS[0] if _TORCH_THREADS else torch.get_num_threads()


def test_alone_the_engine_keeps_all_threads_and_counts_itself_only_while_generating(tiny_model_dir):
    engine = _engine(tiny_model_dir, "alone")
    seen: list[int] = []
    engine.generate(_requests(2), Sampling(max_tokens=4), on_done=lambda i, c: seen.append(cpu_share.active_engines()))
    assert seen == [1, 1]  # itself, while it generates
    assert cpu_share.active_engines() == 0
    assert engine.threads_used == [_all_threads()]


def test_beside_another_generating_engine_it_takes_its_share_from_its_next_batch(tiny_model_dir):
    first, second = _engine(tiny_model_dir, "first"), _engine(tiny_model_dir, "second")
    with cpu_share.generating(second):  # `second` is generating: `first` starts with half the threads
        first.generate(_requests(1), Sampling(max_tokens=4))
    half = max(1, _all_threads() // 2)
    assert first.threads_used == [half]

    held = []

    def second_starts(index: int, _completion) -> None:  # after the first prompt, `second` begins generating
        if index == 0:
            held.append(cpu_share.generating(second))
            held[0].__enter__()

    try:
        first.generate(_requests(2), Sampling(max_tokens=4), on_done=second_starts)
    finally:
        held[0].__exit__(None, None, None)
    assert first.threads_used == ([_all_threads(), half] if half != _all_threads() else [half])
    first.generate(_requests(1), Sampling(max_tokens=4))  # `second` done: all threads again
    assert first.threads_used == [_all_threads()] and cpu_share.active_engines() == 0


def test_only_engines_that_load_this_machines_cpus_count(tiny_model_dir, monkeypatch):
    monkeypatch.setenv("LAB_VLLM_DEVICE", "cpu")
    assert create_engine(f"vllm:{tiny_model_dir}").uses_local_cpu()
    assert create_engine(f"transformers-serve:{tiny_model_dir}?device=cpu").uses_local_cpu()
    assert not create_engine(f"transformers-serve:{tiny_model_dir}?device=cuda").uses_local_cpu()
    assert not create_engine("openai:http://127.0.0.1:9/v1#m").uses_local_cpu()
    assert not create_engine("reference").uses_local_cpu()
    assert _engine(tiny_model_dir, "cpu").uses_local_cpu()


@pytest.mark.slow
def test_a_cpu_server_generating_halves_the_in_process_engines_threads(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_LOG_DIR", str(tmp_path / "logs"))
    served = create_engine(f"transformers-serve:{tiny_model_dir}?device=cpu&name=served&ready_timeout=300")
    inproc = _engine(tiny_model_dir, "inproc")
    served.load()
    try:
        seen: list[tuple[int, list[int]]] = []

        def beside(_index: int, _completion) -> None:  # runs while the server's generate is still going
            inproc.generate(_requests(1), Sampling(max_tokens=4))
            seen.append((cpu_share.active_engines(), list(inproc.threads_used)))

        served.generate(_requests(1), Sampling(max_tokens=4), on_done=beside)
    finally:
        served.close()
    assert seen == [(1, [max(1, _all_threads() // 2)])]  # the server counted; the in-process engine took half
    assert cpu_share.active_engines() == 0
