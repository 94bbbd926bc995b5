"""Token log-probabilities of a generated answer: per token its log-probability and the top-k alternatives.

Every generating engine fills `Completion.logprobs` with a `TokenLogprobs` when it can: vLLM and other
OpenAI-compatible servers through the completions API's `logprobs=K`, in-process transformers from the
raw logits of `generate` (`output_logits`, before temperature and top-p: vLLM's default
`raw_logprobs` mode reports the same). A server that returns none leaves it None: "not recorded"; one
whose log-probabilities are malformed too, with `Completion.logprobs_error` saying why (the answer counts).

The result file keeps them compactly per step (`per_step[i].logprobs`, docs/logprobs.md):
`{"k": K, "tokens": [...], "lp": [...], "top": [[[token, lp], ...], ...]}`, numbers rounded to
`decimals` of `assets/logprobs.yaml`.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from lab.errors import EngineSpecError
from lab.jsontext import lone_surrogate
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


FLOOR = -1e4  # -inf (a token the model gives no mass) is kept as this, so JSON stays finite


class MalformedLogprobs(ValueError):
    """Log-probabilities that are not what the OpenAI completions format says (a server's or a file's):
    the step's are "not recorded", with this reason; its answer still counts."""


def logprob_value(value: Any, where: str) -> float:
    """A log-probability from a server or a file: a JSON number, -inf kept as FLOOR, a positive one (a
    server's rounding) clamped to 0; MalformedLogprobs naming `where` for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MalformedLogprobs(f"{where} is {_kind(value)}, not a number")
    if isinstance(value, int) and value.bit_length() > 1000:  # float() would overflow
        raise MalformedLogprobs(f"{where} is an integer of {value.bit_length():,} bits, past any float")
    number = float(value)
    if math.isnan(number) or number == math.inf:
        raise MalformedLogprobs(f"{where} is {number}, not a log-probability")
    return min(max(number, FLOOR), 0.0)


def token_text(value: Any, where: str) -> str:
    """A token (or an alternative's key) that a UTF-8 file can hold; MalformedLogprobs otherwise."""
    if not isinstance(value, str):
        raise MalformedLogprobs(f"{where} is {_kind(value)}, not a string")
    if lone_surrogate(value) is not None:
        raise MalformedLogprobs(f"{where} holds a lone UTF-16 surrogate (\\uD800-\\uDFFF)")
    return value


def _kind(value: Any) -> str:
    """`a list`, `a string`, `null`, … (what a malformed value was, for the reason)."""
    names = {list: "a list", str: "a string", dict: "an object", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return names.get(type(value), f"a {type(value).__name__}")


def top_pairs(alternatives: Any, k: int, where: str) -> list[tuple[str, float]]:
    """The `k` likeliest of one token's alternatives (an OpenAI `top_logprobs` object, or the compact
    record's [[token, lp], …] list), likeliest first; MalformedLogprobs for anything else."""
    if alternatives is None:
        return []
    if isinstance(alternatives, dict):
        items = list(alternatives.items())
    elif isinstance(alternatives, list) and all(isinstance(p, list) and len(p) == 2 for p in alternatives):
        items = [(p[0], p[1]) for p in alternatives]
    else:
        raise MalformedLogprobs(f"{where} is {_kind(alternatives)}, not an object of token: log-probability")
    pairs = [(token_text(t, f"{where}: a key"), logprob_value(v, f"{where}[{str(t)[:20]!r}]")) for t, v in items]
    return heapq.nlargest(max(0, k), pairs, key=lambda p: p[1])


@dataclass
class TokenLogprobs:
    """Log-probabilities of the generated tokens, in order, with the top-k alternatives of each."""

    k: int
    tokens: list[str] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top: list[list[tuple[str, float]]] = field(default_factory=list)

    def extend(self, tokens: Any, logprobs: Any, top: Any) -> None:
        """Append one streamed chunk's tokens (OpenAI completions format: `top_logprobs` objects), each
        token's alternatives cut to `k`. MalformedLogprobs (nothing appended) when the chunk is not that
        format: tokens not strings, a log-probability that is not a number, `top_logprobs` not a list of
        objects, keys a UTF-8 file cannot hold."""
        if not isinstance(tokens, list):
            raise MalformedLogprobs(f"tokens is {_kind(tokens)}, not a list")
        if not isinstance(logprobs, list):
            raise MalformedLogprobs(f"the log-probabilities are {_kind(logprobs)}, not a list")
        if len(logprobs) < len(tokens):
            raise MalformedLogprobs(f"{len(tokens)} tokens but {len(logprobs)} log-probabilities")
        if top is not None and not isinstance(top, list):
            raise MalformedLogprobs(f"top_logprobs is {_kind(top)}, not a list")
        at = len(self.tokens)
        texts = [token_text(t, f"token {at + i}") for i, t in enumerate(tokens)]
        values = [logprob_value(v, f"token {at + i}'s log-probability") for i, v in enumerate(logprobs[:len(tokens)])]
        tops = [top_pairs(top[i] if top and i < len(top) else None, self.k, f"token {at + i}'s top_logprobs")
                for i in range(len(tokens))]
        self.tokens += texts
        self.logprobs += values
        self.top += tops

    def summary(self) -> dict:
        """Per answer: mean and minimum token log-probability, tokens below the low-confidence line."""
        if not self.logprobs:
            return {"lp_mean": None, "lp_min": None, "lp_low_tokens": None, "lp_tokens": 0}
        line = math.log(logprob_settings()["low_confidence"])
        lowest, highest = min(self.logprobs), max(self.logprobs)
        # a sum's rounding can put the mean of equal values a hair outside them (-6.9885 six times: mean
        # -6.988500000000001 < min): kept within the values it summarizes
        mean = min(max(math.fsum(self.logprobs) / len(self.logprobs), lowest), highest)
        return {
            "lp_mean": mean,
            "lp_min": lowest,
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
        """Read `to_record`'s form back; None for anything else (a stored run without them, or a malformed
        record: `read_record` says why)."""
        return read_record(record)[0]


def read_record(record: Any) -> tuple[TokenLogprobs | None, str | None]:
    """A result file's per-step `logprobs` record read back: (its TokenLogprobs, None), (None, None) for a
    step without one, or (None, why) for a malformed one. Each token's alternatives are cut to the record's
    `k`, and never more than `max_top_k` of assets/logprobs.yaml (a file of 10,000 alternatives a token
    sent megabytes to every visitor who opened the step)."""
    if record is None:
        return None, None
    try:
        if not isinstance(record, dict):
            raise MalformedLogprobs(f"the record is {_kind(record)}, not an object")
        raw_k = record.get("k")
        k = min(raw_k, logprob_settings()["max_top_k"]) if isinstance(raw_k, int) and not isinstance(raw_k, bool) \
            and raw_k >= 0 else logprob_settings()["top_k"]
        recorded = TokenLogprobs(k=k)
        tokens = record.get("tokens", [])
        top = record.get("top")
        if top is not None and not isinstance(top, list):
            raise MalformedLogprobs(f"top is {_kind(top)}, not a list")
        recorded.extend(tokens, record.get("lp"), top)
        return recorded, None
    except MalformedLogprobs as exc:
        return None, f"the file's {exc}"


SUMMARY_KEYS = ("lp_mean", "lp_min", "lp_low_tokens")


def read_summary(record: Any) -> tuple[dict | None, str | None]:
    """A per-step `logprobs_summary` (what a row keeps where the tokens were left behind, e.g. a run imported
    from a dataset: `{"lp_mean", "lp_min", "lp_low_tokens"}`) read back: (its values, None), (None, None) for a
    step without one, or (None, why) for a malformed one (log-probabilities as `logprob_value` takes them, the
    minimum not above the mean, a whole count of low tokens)."""
    if record is None:
        return None, None
    try:
        if not isinstance(record, dict) or set(record) - set(SUMMARY_KEYS) or "lp_mean" not in record:
            raise MalformedLogprobs(f"the summary is {_kind(record)} without exactly {', '.join(SUMMARY_KEYS)}")
        mean = logprob_value(record["lp_mean"], "lp_mean")
        low = logprob_value(record.get("lp_min", mean), "lp_min")
        count = record.get("lp_low_tokens")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or not 0 <= count < 2**31):
            raise MalformedLogprobs(f"lp_low_tokens is {_kind(count)} {str(count)[:20]}, not a whole count")
        if low > mean:
            raise MalformedLogprobs(f"lp_min {low} is above lp_mean {mean}")
        return {"lp_mean": mean, "lp_min": low, "lp_low_tokens": count}, None
    except MalformedLogprobs as exc:
        return None, f"the file's {exc}"


def cut_record(record: Any) -> Any:
    """A per-step `logprobs` record with each token's alternatives cut as `read_record` cuts them; the
    record as it is when nothing needs cutting or it is malformed (`read_record` then says why)."""
    recorded, _ = read_record(record)
    if recorded is None or not isinstance(record.get("top"), list) \
            or all(not isinstance(t, list) or len(t) <= recorded.k for t in record["top"]):
        return record
    return recorded.to_record()


def first_parting(a: list[int], b: list[int]) -> int | None:
    """Index of the first token where two generated sequences differ (None: one is a prefix of the other
    and they are equally long, i.e. identical)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))
