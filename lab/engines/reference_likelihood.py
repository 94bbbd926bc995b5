"""The reference answer's likelihood under an engine: teacher forcing on the rendered prompt, one prefill.

The prompt is tokenized as the engine tokenizes it (its special tokens), the reference without special
tokens, and the two id lists are joined, so the reference's tokens sit at known positions whatever
the tokenizer would merge across the boundary. The engine returns the log-probability of each
reference token given the prompt and the reference before it: vLLM through `prompt_logprobs` on the
joined ids (`max_tokens=1`), in-process transformers through one forward pass.

Engines know nothing about scoring: the run that scores a replay (lab.runs.reference_run) parses the
reference into command units and, per unit, sums the token log-probabilities over the tokens whose characters
overlap the unit's text in the reference (its JSON-escaped form in the raw reply; a unit not found
verbatim there is left out of `units`).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field


@dataclass
class ReferenceTokens:
    """A prompt and a reference as the token ids an engine scores, with the reference's text offsets."""

    prompt_ids: list[int]
    ref_ids: list[int]
    ref_offsets: list[tuple[int, int]] = field(default_factory=list)


def tokenize_pair(tokenizer, prompt: str, reference: str, add_special_tokens: bool = True) -> ReferenceTokens:
    """The prompt's ids (with the engine's special tokens) and the reference's (without), offsets included."""
    prompt_ids = list(tokenizer(prompt, add_special_tokens=add_special_tokens).input_ids)
    try:
        enc = tokenizer(reference, add_special_tokens=False, return_offsets_mapping=True)
        offsets = [tuple(o) for o in enc["offset_mapping"]]
    except (NotImplementedError, TypeError, ValueError):  # a slow tokenizer has no offsets
        enc = tokenizer(reference, add_special_tokens=False)
        offsets = []
    return ReferenceTokens(prompt_ids, list(enc["input_ids"]), offsets)


def unit_spans(reference: str, units: list[str]) -> list[tuple[str, int, int] | None]:
    """Each command unit's character span in the raw reference (its JSON-escaped text first, then its
    plain text), searching forward from the previous unit; None where it is not found verbatim."""
    spans: list[tuple[str, int, int] | None] = []
    cursor = 0
    for unit in units:
        found = None
        for form in (json.dumps(unit, ensure_ascii=False)[1:-1], unit):
            if not form:
                continue
            at = reference.find(form, cursor)
            if at >= 0:
                found = (unit, at, at + len(form))
                cursor = at + len(form)
                break
        spans.append(found)
    return spans


def unit_logprobs(spans: list[tuple[str, int, int] | None], offsets: list[tuple[int, int]],
                  logprobs: list[float]) -> list[dict]:
    """Per located unit: its tokens (those overlapping its span) and their summed log-probability."""
    out = []
    for i, span in enumerate(spans):
        if span is None or not offsets:
            continue
        unit, start, end = span
        picked = [t for t, (a, b) in enumerate(offsets) if a < end and b > start and t < len(logprobs)]
        if picked:
            out.append({"unit": i, "tokens": len(picked), "logprob": sum(logprobs[t] for t in picked)})
    return out


@dataclass
class ReferenceScore:
    """One step's reference likelihood under one engine."""

    logprobs: list[float]
    tokens: list[str] = field(default_factory=list)
    units: list[dict] = field(default_factory=list)
    prompt_tokens: int = 0
    offsets: list[tuple[int, int]] = field(default_factory=list)  # each reference token's characters
    error: str | None = None

    @property
    def total(self) -> float | None:
        return sum(self.logprobs) if self.logprobs else None

    @property
    def mean(self) -> float | None:
        return self.total / len(self.logprobs) if self.logprobs else None

    @property
    def nll_per_token(self) -> float | None:
        return -self.mean + 0.0 if self.mean is not None else None  # + 0.0: a mean of 0 (clamped) is 0, not -0

    def to_row(self, decimals: int = 4) -> dict:
        """The per-step row of a reference-likelihood file (docs/logprobs.md)."""
        rnd = (lambda v: None if v is None or not math.isfinite(v) else round(v, decimals))
        return {
            "ref_tokens": len(self.logprobs),
            "ref_logprob": rnd(self.total),
            "ref_logprob_mean": rnd(self.mean),
            "ref_nll_per_token": rnd(self.nll_per_token),
            "prompt_tokens": self.prompt_tokens,
            "token_logprobs": [rnd(v) for v in self.logprobs],
            "tokens": list(self.tokens),
            "unit_logprobs": [{**u, "logprob": rnd(u["logprob"])} for u in self.units],
            "error": self.error,
        }
