"""The `vllm:` engine's runtime_lora option without a server: its environment, its refusals, who may set it."""
from __future__ import annotations

import pytest

from lab.engines import create_engine
from lab.engines.admission import Admission
from lab.engines.registry import resolve_spec
from lab.errors import EngineLoadError, EngineSpecError


def test_runtime_lora_lets_the_server_load_adapters_and_is_off_by_default(tmp_path):
    on = create_engine(f"vllm:{tmp_path}?runtime_lora=true&lora={tmp_path}")
    off = create_engine(f"vllm:{tmp_path}?lora={tmp_path}")
    assert on.server_env()["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING" not in off.server_env()
    assert "runtime_lora" not in on.extra  # the lab's own option, never a `vllm serve` flag
    with pytest.raises(EngineSpecError, match="runtime_lora' must be true or false"):
        create_engine(f"vllm:{tmp_path}?runtime_lora=maybe")


def test_swap_adapter_needs_a_running_server_that_allows_it(tmp_path):
    for spec in (f"vllm:{tmp_path}?lora={tmp_path}", f"vllm:{tmp_path}?runtime_lora=true&lora={tmp_path}"):
        with pytest.raises(EngineLoadError, match="swap_adapter needs a running server started with a LoRA adapter"):
            create_engine(spec).swap_adapter(str(tmp_path))


def test_visitors_of_a_public_deployment_cannot_set_it(tmp_path):
    admission = Admission(public=True, allow_models=True, data_roots=[tmp_path])
    with pytest.raises(EngineSpecError, match="option 'runtime_lora' is not open to visitors"):
        admission.check(resolve_spec("vllm:org/model?runtime_lora=true"), visitor=True)
