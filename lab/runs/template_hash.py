"""A run's chat template as one hash: a fixed probe conversation (template_probe.yaml) rendered exactly as the
engine renders every step (its output contract, chat template and kwargs, prompt options and fallbacks),
then sha256. Two runs with the same hash were asked in the same words; a comparison of runs whose hashes
differ says so (lab.resultfiles.run_settings)."""
from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

import yaml

from lab.data.step import Step
from lab.engines.common import EngineBase
from lab.prompts.engine_prompt import render_for_engine

PROBE_PATH = Path(__file__).with_name("template_probe.yaml")


@lru_cache(maxsize=1)
def probe_step() -> Step:
    """The probe conversation as a replay step (its history is the messages before the last user turn's answer)."""
    raw = yaml.safe_load(PROBE_PATH.read_text(encoding="utf-8"))
    return Step(task_id=str(raw["task_id"]), sample_idx=0, step_idx=1, total_steps=2, is_final_step=True,
                source="template-probe", source_group="template-probe",
                messages=tuple(dict(m) for m in raw["messages"]), prompt=str(raw["prompt"]), ref_raw=str(raw["ref_raw"]))


def template_sha256(engine: EngineBase) -> str:
    """sha256 (hex) of the probe conversation rendered for `engine`, with its rendering status."""
    rendered = render_for_engine(engine, probe_step())
    return hashlib.sha256(f"{rendered.status}\n{rendered.text}".encode("utf-8")).hexdigest()
