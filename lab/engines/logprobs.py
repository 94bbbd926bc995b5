"""Token log-probabilities of a generated answer: per token its log-probability and the top-k alternatives.

Every generating engine fills `Completion.logprobs` with a `TokenLogprobs` when it can: vLLM and other
OpenAI-compatible servers through the completions API's `logprobs=K`, in-process transformers from the
raw logits of `generate` (`output_logits`, before temperature and top-p: vLLM's default
`raw_logprobs` mode reports the same). A server that returns none leaves it None: "not recorded".

The result file keeps them compactly per step (`per_step[i].logprobs`, docs/logprobs.md):
`{"k": K, "tokens": [...], "lp": [...], "top": [[[token, lp], ...], ...]}`, numbers rounded to
`decimals` of `assets/logprobs.yaml`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from lab.errors import EngineSpecError
from lab.settings import PROJECT_ROOT, read_limits

SETTINGS_FILE = Path(PROJECT_ROOT) / "assets" / "logprobs.yaml"


@lru_cache(maxsize=1)
def logprob_settings() -> dict:
    """`assets/logprobs.yaml` (`LAB_LOGPROBS_SETTINGS=FILE` names another)."""
    data = read_limits(SETTINGS_FILE, "LAB_LOGPROBS_SETTINGS", "the log-probability settings")
    return {"top_k": int(data.get("top_k", 5)), "max_top_k": int(data.get("max_top_k", 20)),
            "low_confidence": float(data.get("low_confidence", 0.5)), "confident": float(data.get("confident", 0.8)),
            "decimals": int(data.get("decimals", 4))}


def top_k_option(value: Any, spec: str) -> int:
    """The `logprobs=K` engine option: 0 (none) to max_top_k; the default when not given."""
    settings = logprob_settings()
    if value is None:
        return settings["top_k"]
    try:
        k = int(str(value).strip())
    except ValueError:
        raise EngineSpecError(f"engine spec '{spec}': logprobs must be a whole number (0 to "
                              f"{settings['max_top_k']}), got {str(value)[:40]!r}") from None
    if not 0 <= k <= settings["max_top_k"]:
        raise EngineSpecError(f"engine spec '{spec}': logprobs must be 0 to {settings['max_top_k']}, got {k}")
    return k


def _finite(value: Any) -> float | None:
    """A log-probability as a float; None for what is not one (a server's NaN or garbage)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if math.isnan(number) or number > 0:
        return None
    return max(number, -1e4)  # -inf (a token the model gives no mass) stays finite in JSON


@dataclass
class TokenLogprobs:
    """Log-probabilities of the generated tokens, in order, with the top-k alternatives of each."""

    k: int
    tokens: list[str] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top: list[list[tuple[str, float]]] = field(default_factory=list)

    def extend(self, tokens: list[str], logprobs: list[Any], top: list[dict | None] | None) -> None:
        """Append one streamed chunk's tokens (OpenAI completions format: `top_logprobs` dicts)."""
        for i, token in enumerate(tokens):
            lp = _finite(logprobs[i] if i < len(logprobs) else None)
            self.tokens.append(str(token))
            self.logprobs.append(lp if lp is not None else -1e4)
            alternatives = (top[i] if top and i < len(top) else None) or {}
            pairs = [(str(t), v) for t, v in ((t, _finite(v)) for t, v in alternatives.items()) if v is not None]
            pairs.sort(key=lambda p: -p[1])
            self.top.append(pairs[: self.k])

    def summary(self) -> dict:
        """Per answer: mean and minimum token log-probability, tokens below the low-confidence line."""
        if not self.logprobs:
            return {"lp_mean": None, "lp_min": None, "lp_low_tokens": None, "lp_tokens": 0}
        line = math.log(logprob_settings()["low_confidence"])
        return {
            "lp_mean": sum(self.logprobs) / len(self.logprobs),
            "lp_min": min(self.logprobs),
            "lp_low_tokens": sum(1 for v in self.logprobs if v < line),
            "lp_tokens": len(self.logprobs),
        }

    def to_record(self) -> dict:
        """The compact form kept in a result file's per-step row."""
        d = logprob_settings()["decimals"]
        return {
            "k": self.k,
            "tokens": list(self.tokens),
            "lp": [round(v, d) for v in self.logprobs],
            "top": [[[t, round(v, d)] for t, v in alts] for alts in self.top],
        }

    @classmethod
    def from_record(cls, record: Any) -> "TokenLogprobs | None":
        """Read `to_record`'s form back; None for anything else (a stored run without them)."""
        if not isinstance(record, dict) or not isinstance(record.get("lp"), list):
            return None
        tokens = record.get("tokens") if isinstance(record.get("tokens"), list) else []
        lps = [_finite(v) for v in record["lp"]]
        top_in = record.get("top") if isinstance(record.get("top"), list) else []
        top: list[list[tuple[str, float]]] = []
        for alts in top_in:
            pairs = [(str(p[0]), _finite(p[1])) for p in alts if isinstance(p, list) and len(p) == 2] \
                if isinstance(alts, list) else []
            top.append([(t, v) for t, v in pairs if v is not None])
        k = record.get("k") if isinstance(record.get("k"), int) else 0
        return cls(k=k, tokens=[str(t) for t in tokens], logprobs=[v if v is not None else -1e4 for v in lps], top=top)


def first_parting(a: list[int], b: list[int]) -> int | None:
    """Index of the first token where two generated sequences differ (None: one is a prefix of the other
    and they are equally long, i.e. identical)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))
