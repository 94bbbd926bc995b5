"""Derive display names, family, size and training method from model names (rules in name_rules.yaml)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

RULES_PATH = Path(__file__).with_name("name_rules.yaml")
MAX_GIVEN_NAME = 200  # characters of a user-given run name the store keeps (the lab's own limit is 120)
CONTROL_RX = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


@dataclass(frozen=True)
class NameRules:
    families: tuple[tuple[str, re.Pattern], ...]
    params: re.Pattern
    active_params: re.Pattern
    epochs: re.Pattern
    checkpoint: re.Pattern
    training_methods: tuple[tuple[str, re.Pattern], ...]
    default_training_method: str


@lru_cache(maxsize=1)
def load_rules(path: Path = RULES_PATH) -> NameRules:
    """Read and compile the name rules."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    flags = re.IGNORECASE
    return NameRules(
        families=tuple((name, re.compile(rx, flags)) for name, rx in raw["families"]),
        params=re.compile(raw["params_regex"], flags),
        active_params=re.compile(raw["active_params_regex"], flags),
        epochs=re.compile(raw["epochs_regex"], flags),
        checkpoint=re.compile(raw["checkpoint_regex"], flags),
        training_methods=tuple((name, re.compile(rx, flags)) for name, rx in raw["training_methods"]),
        default_training_method=raw["default_training_method"],
    )


def family_of(name: str) -> str | None:
    """Model family (Qwen, LFM, Gemma, …) named in `name`, or None."""
    for family, rx in load_rules().families:
        if rx.search(name):
            return family
    return None


def _number(rx: re.Pattern, name: str) -> float | None:
    m = rx.search(name.split("/")[-1] if "/" in name else name)
    if not m:
        return None
    return float(next(g for g in m.groups() if g is not None))


def params_of(name: str) -> tuple[float | None, float | None]:
    """(total, active) parameters in billions from `NB` / `A{N}B` tokens; Gemma `E4B` sizes are not totals."""
    return _number(load_rules().params, name), _number(load_rules().active_params, name)


def epochs_of(name: str) -> int | None:
    value = _number(load_rules().epochs, name)
    return int(value) if value is not None else None


def checkpoint_step_of(name: str) -> int | None:
    m = load_rules().checkpoint.search(name or "")
    return int(m.group(1)) if m else None


def training_method_of(text: str) -> str:
    """Coarse training method (base, SFT, LoRA, RL (GRPO/RLVR), RL (DPPO), third-party fine-tune)."""
    rules = load_rules()
    for method, rx in rules.training_methods:
        if rx.search(text or ""):
            return method
    return rules.default_training_method


def user_given_name(result: dict) -> str | None:
    """The name the user gave a lab run (`run_name`: --name, `name=` in its SPEC, a training run's name), its
    whitespace and control characters folded to single spaces; None when the lab chose the name."""
    chosen = result.get("run_name")
    text = " ".join(CONTROL_RX.sub(" ", chosen).split())[:MAX_GIVEN_NAME] if isinstance(chosen, str) else ""
    return text or None


def display_name(result: dict, short_to_repo: dict[str, str] | None = None) -> str:
    """The name the user gave the run, shown as given (`user_given_name`); else SPEC §9's display name: known
    short name → repo; model_path unless absolute; directory name (+ " (checkpoint-N)"), unless a lab run
    (`engine_spec`) was given its own name; else model_short. A LoRA adapter is appended as " + LoRA <name>"
    (not to a name the user gave) so adapter runs on one base stay apart."""
    given = user_given_name(result)
    if given is not None:
        return given
    short = str(result.get("model_short") or result.get("model") or "")
    model_path = str(result.get("model_path") or "")
    if short_to_repo and short in short_to_repo:
        name = short_to_repo[short]
    elif model_path and not model_path.startswith("/"):
        name = model_path
    elif model_path:
        parts = [p for p in model_path.rstrip("/").split("/") if p]
        last = parts[-1] if parts else ""
        if result.get("engine_spec") and short and short != last:
            name = short  # a lab run named by its engine / run name (`tinyB` on /models/tiny stays `tinyB`)
        elif last.startswith("checkpoint-") and len(parts) > 1:
            name = f"{parts[-2]} ({last})"
        else:
            name = last or short
    else:
        name = short or "unnamed"
    lora = result.get("lora_name") or (str(result["lora_path"]).rstrip("/").split("/")[-1] if result.get("lora_path") else None)
    if lora and lora not in name:
        name = f"{name} + LoRA {lora}"
    return name
