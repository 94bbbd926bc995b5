"""`reference`: answers every step with its reference reply (a sanity check that scores 100)."""
from __future__ import annotations

import time

from lab.engines.base import Completion, EngineInfo, Request, Sampling
from lab.engines.common import EngineBase, EngineConfig, OnDone


class ReferenceEngine(EngineBase):
    """Returns `request.step.ref_raw` verbatim; needs no model."""

    kind = "reference"
    usage = "reference"
    answers_from_data = True
    answers_reference = True
    takes_target = False
    OPTIONS: dict[str, str] = {}

    def __init__(self, config: EngineConfig) -> None:
        super().__init__(config, model_id="reference", name="reference")

    def generate(self, requests: list[Request], sampling: Sampling, on_done: OnDone | None = None) -> list[Completion]:
        results: list = [None] * len(requests)
        for i, request in enumerate(requests):
            start = time.perf_counter()
            completion = Completion(text=request.step.ref_raw, finish_reason="stop")
            completion.latency_s = time.perf_counter() - start
            self.finish(i, completion, results, on_done)
        return results

    def describe(self) -> EngineInfo:
        return EngineInfo(kind=self.kind, model="reference", device="none", notes="answers with the reference reply")
