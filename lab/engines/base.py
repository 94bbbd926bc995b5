"""What passes to and from an engine: requests, sampling, completions, its description. The engine type
itself (load, generate, close and every attribute a caller may use) is `lab.engines.common.EngineBase`."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Sequence

from lab.data.step import Step
from lab.engines.logprobs import TokenLogprobs


@dataclass
class Sampling:
    """Generation parameters sent to an engine (SPEC §8 `sampling`).

    The defaults are the harness's: it builds vLLM `SamplingParams` from temperature, top_p,
    max_tokens, repetition_penalty (and min_p only when > 0), so top_k and min_p stay neutral."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 1024
    repetition_penalty: float = 1.0
    top_k: int = -1  # all tokens (vLLM's "disabled"; its SamplingParams reads 0 and -1 alike)
    min_p: float = 0.0
    stop: list[str] | None = None
    seed: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Request:
    """One generation request: the step (for engines that answer from data) and the prompt text, with
    its token ids as the engine would tokenize it where the lab has them (an engine may send those)."""

    step: Step
    prompt: str
    prompt_ids: Sequence[int] | None = None


@dataclass
class Completion:
    """What an engine returned for one request.

    `command_units` is set only by engines that replay stored answers whose raw text may be
    truncated (stored result files keep 1,200 characters): the pipeline then uses these units
    instead of re-parsing `text`.
    """

    text: str
    finish_reason: str | None = None
    stop_reason: str | int | None = None
    token_ids: list[int] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    ttft_s: float | None = None
    latency_s: float | None = None
    error: str | None = None
    command_units: list[str] | None = None
    stored: dict | None = None
    absent: bool = False  # a stored run that never answered this step: not scored, not aggregated
    logprobs: TokenLogprobs | None = None  # per generated token (None: the engine did not record them)
    logprobs_error: str | None = None  # why `logprobs` is None although asked for (a server's malformed ones)


@dataclass
class EngineInfo:
    """Description of a loaded engine for the UI and the result file."""

    kind: str
    model: str
    device: str = "cpu"
    memory_gb: float | None = None
    lora: str | None = None
    notes: str = ""
    architecture: str | None = None  # the model's class (config.json `architectures`), where known
    context_length: int | None = None  # the context the engine runs the model with
    dtype: str | None = None
    flags: list[str] | None = None  # a managed server's command-line flags
