"""A model's context length read from its own config (assets/context.yaml says where), the one budget of a
prompt in a context (`prompt_budget`) and the one test of whether it fits (`prompt_fits`, `reference_fit_error`
for a reference scored after its prompt), the one resolution of an engine's context (`context_length`), and the
guard that refuses a prompt which, with `max_tokens`, would run past it: in-process transformers and
`transformers serve` would otherwise generate past the model's positions."""
from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from lab.settings import PROJECT_ROOT

if TYPE_CHECKING:
    from lab.engines.common import EngineBase

CONTEXT_PATH = PROJECT_ROOT / "assets" / "context.yaml"


@functools.lru_cache(maxsize=1)
def context_rules(path: str | None = None) -> dict:
    """assets/context.yaml as a mapping."""
    return yaml.safe_load(Path(path or CONTEXT_PATH).read_text(encoding="utf-8")) or {}


def _positive_int(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def config_context_length(config: Any) -> tuple[int, str] | None:
    """(length, field) from a transformers config object or a config.json mapping; None when absent."""
    rules = context_rules()
    get = config.get if isinstance(config, dict) else (lambda key, default=None: getattr(config, key, default))
    for field in rules["config_fields"]:
        value = _positive_int(get(field, None))
        if value:
            return value, field
    for nested in rules["nested_configs"]:
        inner = get(nested, None)
        if inner is not None and inner is not config:
            found = config_context_length(inner)
            if found:
                return found[0], f"{nested}.{found[1]}"
    return None


def model_context_length(config: Any, tokenizer: Any = None) -> tuple[int, str] | None:
    """The model's context: its config's field, or the tokenizer's `model_max_length` when that is
    smaller and meaningful. Returns (length, where it was read) or None."""
    found = config_context_length(config) if config is not None else None
    limit = _positive_int(getattr(tokenizer, "model_max_length", None)) if tokenizer is not None else None
    if limit and limit < int(context_rules()["tokenizer_max_meaningful"]) and (found is None or limit < found[0]):
        return limit, "tokenizer model_max_length"
    return found


def read_context_length(model_source: str) -> tuple[int, str] | None:
    """The context length of a local model folder (or one in the HF cache), never downloading."""
    try:
        from transformers import AutoConfig, AutoTokenizer
    except ImportError:
        return None
    local = Path(model_source).expanduser().is_dir()
    try:
        config = AutoConfig.from_pretrained(model_source, local_files_only=not local)
    except Exception:  # noqa: BLE001 - no config: the context stays unknown, as before
        return None
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_source, local_files_only=not local)
    except Exception:  # noqa: BLE001
        tokenizer = None
    return model_context_length(config, tokenizer)


# New tokens a server's generation request needs room for, whatever its max_tokens: vLLM (0.32, the lab's
# pinned version) refuses a prompt of exactly max_model_len tokens, "plus the number of requested output tokens
# (at least 1)" (vllm/v1/engine/input_processor.py, _validate_prompt_len); a reference scored through a server
# is one such request (prompt_logprobs with max_tokens=1)
SERVER_MIN_NEW_TOKENS = 1


def prompt_budget(max_model_len: int, new_tokens: int) -> int:
    """The most prompt tokens a context of `max_model_len` holds while leaving room for `new_tokens` more:
    `max_model_len - new_tokens` (the lab's one formula: the engines' refusals, the replay's guard, the prompt
    audit's budget and cut, the reference's fit).

    The prompt is counted as the engine sends it, with the special tokens its tokenizer adds (a BOS: vLLM's
    /v1/completions and `transformers serve` tokenize a text prompt with them, a transformers engine unless
    `add_special_tokens=false`; lab.prompts.render.sent_tokens): a prompt whose own text is at the budget is one
    token over it once the server prepends BOS. Token ids sent as such (the reference's likelihood through a
    server) get nothing added. Position `max_model_len - 1` is the last the model has, so a prompt of exactly
    the budget fits, one token more does not."""
    return max_model_len - new_tokens


def prompt_fits(n_tokens: int, max_tokens: int, max_model_len: int) -> bool:
    """Whether a prompt of `n_tokens` (as sent: `prompt_budget`) leaves room for `max_tokens` new tokens in a
    context of `max_model_len` (the one test: the engines' refusal, the replay's guard, the prompt audit)."""
    return n_tokens <= prompt_budget(max_model_len, max_tokens)


def reference_fit_error(n_prompt: int, n_ref: int, max_model_len: int | None, new_tokens: int) -> str | None:
    """Why a reference of `n_ref` tokens scored after a prompt of `n_prompt` (its ids as sent, special tokens
    included) does not fit a context of `max_model_len`, or None (also when the context is unknown).
    `new_tokens`: what the scoring generates past them: 0 for a forward pass over the ids (transformers), 1 for a
    server's request (`SERVER_MIN_NEW_TOKENS`: vLLM scores the ids as a prompt and must generate one token)."""
    total = n_prompt + n_ref
    if not max_model_len or prompt_fits(total, new_tokens, max_model_len):
        return None
    plus = f" (+ {new_tokens} generated)" if new_tokens else ""
    return f"prompt + reference is {total} tokens{plus}, past the context of {max_model_len}"


def context_length(engine: EngineBase, given: int | None = None, *, assumed: bool = False) -> int | None:
    """The context `engine` runs its model with: `given` (a run's --max-model-len), else what the engine
    knows (its `max_model_len`: the server's reported context, its model config's, or the one it was
    started with), else its settings' `max_model_len` (a vLLM engine's flag). None when unknown; with
    `assumed`, never None: then its preset's `engine.max_model_len`, else the presets file's default (the
    TB2-lite setting, 49152), for views that need a number (the prompt audit's budget)."""
    value = given or engine.max_model_len or engine.settings.get("max_model_len")
    if value is None and assumed:
        preset = engine.preset
        value = preset.engine.get("max_model_len") if preset is not None else None
        if value is None:
            from lab.engines.presets import load_engine_defaults

            value = load_engine_defaults().get("max_model_len")
    return int(value) if value is not None else None


def overlong_error(n_tokens: int, max_tokens: int, max_model_len: int, source: str | None) -> str | None:
    """The one-line refusal for a prompt that, with `max_tokens`, exceeds the context; None when it fits."""
    if prompt_fits(n_tokens, max_tokens, max_model_len):
        return None
    where = f" ({source})" if source else ""
    return (f"prompt too long: {n_tokens:,} prompt tokens + max_tokens {max_tokens:,} exceed the model's context of "
            f"{max_model_len:,} tokens{where}; refused before generation (lower max_tokens, or skip this step)")


GENERATION_IDS = ("eos_token_id", "pad_token_id", "bos_token_id", "decoder_start_token_id")


def model_generation_config(model_source: str) -> dict:
    """A local model's generation config as a plain mapping (its generation_config.json, else the
    token ids of its config.json); {} when neither can be read. Never downloads."""
    try:
        from transformers import AutoConfig, GenerationConfig
    except ImportError:
        return {}
    local = Path(model_source).expanduser().is_dir()
    try:
        found = GenerationConfig.from_pretrained(model_source, local_files_only=not local).to_diff_dict()
        return {k: v for k, v in found.items() if not k.startswith("_") and k != "transformers_version"}
    except Exception:  # noqa: BLE001 - no generation_config.json: fall back to config.json's ids
        pass
    try:
        config = AutoConfig.from_pretrained(model_source, local_files_only=not local)
    except Exception:  # noqa: BLE001
        return {}
    return {key: getattr(config, key) for key in GENERATION_IDS if getattr(config, key, None) is not None}
