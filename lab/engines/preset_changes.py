"""What a preset changes: the engine a SPEC with a preset builds against the same SPEC without it (the same
model, the SPEC's own options kept), part by part: server flags (and in-process engine settings), prompt
options, contract, sampling and adapter. Nothing is loaded: both engines are only built."""
from __future__ import annotations

from dataclasses import dataclass

from lab.engines.common import EngineBase, EngineConfig
from lab.engines.presets import ENGINE_KEYS
from lab.engines.servers.flags import flag_name
from lab.errors import LabError

PARTS = ("server flag", "engine setting", "prompt option", "contract", "sampling", "adapter")


@dataclass(frozen=True)
class PresetChange:
    """One thing the preset sets: its `part` (PARTS), its name, and its value with and without the preset."""

    part: str
    name: str
    with_preset: str
    without: str

    def text(self) -> str:
        """`server flag --language-model-only: true (without the preset: false)`."""
        name = f" {self.name}" if self.name else ""
        return f"{self.part}{name}: {self.with_preset} (without the preset: {self.without})"


def _shown(value: object) -> str:
    if value is None or value == "":
        return "not set"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def plain_engine(engine: EngineBase) -> EngineBase | None:
    """The engine the same SPEC builds without its preset (the checkpoint it names, or the preset's own
    model for a bare preset), or None when the engine has no preset or that one cannot be built."""
    from lab.engines.registry import ENGINE_KINDS, resolve_spec

    preset = engine.preset
    if preset is None:
        return None
    try:
        config = resolve_spec(engine.spec, {preset.key: preset})
        target = config.target if config.preset_on_target else preset.hf_id
        plain = EngineConfig(spec=config.spec, kind=config.kind, target=target, options=dict(config.options))
        return ENGINE_KINDS[config.kind](plain)
    except LabError:
        return None


def _pairs(part: str, mine: dict, other: dict, name=lambda key: key) -> list[PresetChange]:
    return [PresetChange(part, name(key), _shown(mine.get(key)), _shown(other.get(key)))
            for key in mine.keys() | other.keys() if _shown(mine.get(key)) != _shown(other.get(key))]


def preset_changes(engine: EngineBase) -> list[PresetChange]:
    """Every difference the preset makes to `engine` (in PARTS order), [] without a preset."""
    plain = plain_engine(engine)
    if plain is None:
        return []
    changes: list[PresetChange] = []
    settings, plain_settings = engine.settings, plain.settings
    if settings or plain_settings:  # a managed vLLM server's flags
        keys = [k for k in ENGINE_KEYS if k in settings or k in plain_settings]
        changes += sorted(_pairs("server flag", {k: settings.get(k) for k in keys},
                                 {k: plain_settings.get(k) for k in keys}, flag_name), key=lambda c: c.name)
    trust = (engine.trust_remote_code, plain.trust_remote_code)
    if trust[0] != trust[1]:
        part = "server flag" if engine.managed else "engine setting"
        changes.append(PresetChange(part, "--trust-remote-code" if part == "server flag" else "trust_remote_code",
                                    _shown(trust[0]), _shown(trust[1])))
    dtype = (engine.preset_dtype, plain.preset_dtype)  # in-process transformers
    if dtype[0] != dtype[1]:
        changes.append(PresetChange("engine setting", "dtype (with dtype=auto)", _shown(dtype[0]), _shown(dtype[1])))
    changes += sorted(_pairs("prompt option", dict(engine.prompt_options), dict(plain.prompt_options)),
                      key=lambda c: c.name)
    if engine.contract != plain.contract:
        changes.append(PresetChange("contract", "", engine.contract, plain.contract))
    sampling = engine.default_sampling.to_dict()
    fields = list(sampling)
    changes += sorted(_pairs("sampling", sampling, plain.default_sampling.to_dict()),
                      key=lambda c: fields.index(c.name) if c.name in fields else len(fields))
    changes.sort(key=lambda c: PARTS.index(c.part))  # stable: each part keeps its order
    lora = (engine.lora, plain.lora)
    if lora[0] != lora[1]:
        changes.append(PresetChange("adapter", "LoRA", _shown(lora[0]), _shown(lora[1])))
    return changes
