"""`create_engine(spec)`: SPEC prefix -> engine class, plus bare preset names (assets/models.yaml).

    reference                          answers with the reference reply
    stored:PATH                        answers from a result JSON file
    transformers:MODEL_OR_PATH|PRESET  local transformers (+ peft LoRA)
    vllm:MODEL_OR_PATH|PRESET          a `vllm serve` the lab starts and stops (GPU)
    transformers-serve:MODEL_OR_PATH   a `transformers serve` the lab starts and stops (CPU/GPU)
    openai:BASE_URL#MODEL              an OpenAI-compatible /v1/completions server
    PRESET                             a preset key, loaded with the preset's kind

Options follow `?` (`transformers:/m?device=cpu&lora=/a`); keyword overrides given to
`create_engine` win over them. Each kind lists its options in its class's `OPTIONS`.

`?preset=KEY` on a `vllm:`, `transformers:` or `transformers-serve:` SPEC applies that preset's
settings (engine flags, prompt options, contract, sampling, its LoRA unless `lora=` is given) to
the model the SPEC names, a checkpoint folder or a Hub id (`vllm:/ckpts/checkpoint-300?preset=
qwen35-2b-sft`); the SPEC's other options override the preset's.
"""
from __future__ import annotations

from pathlib import Path

from lab.engines.common import COMMON_OPTIONS, EngineBase, EngineConfig
from lab.engines.openai_engine import OpenAIEngine
from lab.engines.presets import Preset, load_presets
from lab.engines.reference import ReferenceEngine
from lab.engines.spec import split_spec
from lab.engines.servers.transformers_serve import TransformersServeEngine
from lab.engines.servers.vllm_server import VLLMServerEngine
from lab.engines.stored import StoredEngine
from lab.engines.transformers_engine import TransformersEngine
from lab.errors import EngineSpecError

ENGINE_CLASSES: tuple[type[EngineBase], ...] = (
    ReferenceEngine, StoredEngine, TransformersEngine, VLLMServerEngine, TransformersServeEngine, OpenAIEngine,
)
# kind -> class, from the classes' own `kind` (each class declares its usage and traits: lab.engines.common)
ENGINE_KINDS: dict[str, type[EngineBase]] = {cls.kind: cls for cls in ENGINE_CLASSES}


def engine_class(kind: str) -> type[EngineBase]:
    """The class of engine `kind`, whose traits say what the kind does; EngineBase itself (every trait at
    its default) for a kind the lab does not have."""
    return ENGINE_KINDS.get(kind, EngineBase)


def _unknown(spec: str, presets: dict[str, Preset] | None, problem: str) -> EngineSpecError:
    kinds = ", ".join(cls.usage for cls in ENGINE_CLASSES)
    names = ", ".join(sorted(presets)) if presets else "(none)"
    return EngineSpecError(f"{problem} '{spec}'. Engine kinds: {kinds}. Presets: {names}")


def resolve_spec(spec: str, presets: dict[str, Preset] | None = None) -> EngineConfig:
    """Turn a SPEC string into an EngineConfig (kind, target, options, preset) without loading."""
    parsed = split_spec(spec)
    kind, target, options = parsed.kind, parsed.target, dict(parsed.options)
    has_colon = ":" in parsed.text.partition("?")[0]

    def get_presets() -> dict[str, Preset]:
        return presets if presets is not None else load_presets()

    if not has_colon:
        if "preset" in options:
            raise EngineSpecError(f"engine spec '{spec}': ?preset= goes on a model SPEC "
                                  f"(vllm:MODEL_OR_PATH?preset=KEY); a bare preset name is already a preset")
        if kind in ENGINE_KINDS and not ENGINE_KINDS[kind].takes_target:
            return EngineConfig(spec=parsed.text, kind=kind, target="", options=options)
        table = get_presets()
        if kind in table:
            preset = table[kind]
            return EngineConfig(spec=parsed.text, kind=preset.kind, target=kind, options=options, preset=preset)
        if kind in ENGINE_KINDS:
            raise EngineSpecError(f"engine spec '{spec}' needs a target: {ENGINE_KINDS[kind].usage}")
        raise _unknown(spec, table, "unknown engine or preset")
    if kind not in ENGINE_KINDS:
        raise _unknown(spec, get_presets(), f"unknown engine kind '{kind}' in")
    if "preset" in options:
        return _with_preset(parsed.text, kind, target, options, get_presets())
    preset = None
    if ENGINE_KINDS[kind].takes_preset and target and not Path(target).expanduser().exists():
        preset = get_presets().get(target)
    return EngineConfig(spec=parsed.text, kind=kind, target=target, options=options, preset=preset)


def _with_preset(spec: str, kind: str, target: str, options: dict, table: dict[str, Preset]) -> EngineConfig:
    """`KIND:MODEL?preset=KEY`: the preset's settings on MODEL (the checkpoint the SPEC names)."""
    key = options.pop("preset")
    if not ENGINE_KINDS[kind].takes_preset:
        raise EngineSpecError(f"engine spec '{spec}': ?preset= applies to vllm:, transformers: and "
                              f"transformers-serve: SPECs only, not to {kind}:")
    if key not in table:
        names = ", ".join(sorted(table)) or "(none)"
        raise EngineSpecError(f"engine spec '{spec}': unknown preset '{key}'; presets: {names}")
    if not target:
        raise EngineSpecError(f"engine spec '{spec}': give the checkpoint the preset applies to, "
                              f"e.g. {kind}:/ckpts/checkpoint-100?preset={key}")
    if target in table and not Path(target).expanduser().exists():
        raise EngineSpecError(f"engine spec '{spec}': '{target}' is a preset itself; give a checkpoint folder "
                              f"or Hub id before ?preset=, or use {kind}:{target} alone")
    return EngineConfig(spec=spec, kind=kind, target=target, options=options, preset=table[key], preset_on_target=True)


def create_engine(spec: str, *, presets: dict[str, Preset] | None = None, **overrides) -> EngineBase:
    """Build (not load) the engine a SPEC names; keyword overrides win over `?` options.

    Raises EngineSpecError for an unknown kind/preset or a bad option (listing what exists)."""
    config = resolve_spec(spec, presets)
    config.options.update({k: v for k, v in overrides.items() if v is not None})
    return ENGINE_KINDS[config.kind](config)


def engine_kinds() -> dict[str, str]:
    """Kind -> usage string, for help texts and the UI."""
    return {cls.kind: cls.usage for cls in ENGINE_CLASSES}


def engine_options(kind: str) -> dict[str, str]:
    """Option -> help for one kind (common options included)."""
    if kind not in ENGINE_KINDS:
        raise EngineSpecError(f"unknown engine kind '{kind}'; kinds: {', '.join(ENGINE_KINDS)}")
    return {**COMMON_OPTIONS, **ENGINE_KINDS[kind].OPTIONS}
