"""Whether a checkpoint is of the family its preset was made for (`vllm:CKPT?preset=KEY`): its config.json
(`model_type`, its text config's, `architectures`, read locally, never downloaded) against the preset's
family in assets/models.yaml. A mismatch is one line the Engines tab, the prompt audit and the CLI show: the
engine still runs, with prompt rules, contract and server flags chosen for another family."""
from __future__ import annotations

from dataclasses import dataclass

from lab.engines.common import EngineBase
from lab.engines.model_facts import config_kinds, read_config
from lab.engines.presets import Family, load_families
from lab.errors import LabError



@dataclass(frozen=True)
class Checkpoint:
    """What a checkpoint's config.json says it is (empty lists: no config found)."""

    model_types: tuple[str, ...] = ()
    architectures: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        return bool(self.model_types or self.architectures)

    def text(self) -> str:
        """`Gemma3ForCausalLM (gemma3_text)`, or what is known of it."""
        arch = self.architectures[0] if self.architectures else ""
        kinds = ", ".join(self.model_types)
        return f"{arch} ({kinds})" if arch and kinds else arch or kinds


def read_checkpoint(model: str | None) -> Checkpoint:
    """The model types and architectures `model`'s config.json names (nothing when it has none here)."""
    config = read_config(model)
    if config is None:
        return Checkpoint()
    types, archs = config_kinds(config)
    return Checkpoint(tuple(types), tuple(archs))


def fits(checkpoint: Checkpoint, family: Family) -> bool:
    """Whether the checkpoint is of `family`: one of its model types or architectures is the family's."""
    return bool(set(checkpoint.model_types) & set(family.model_types)
                or set(checkpoint.architectures) & set(family.architectures))


def fit_warning(engine: EngineBase, families: dict[str, Family] | None = None) -> str | None:
    """One line when `engine` runs a preset on a checkpoint (`?preset=KEY`) whose config.json names another
    family than the preset's; None when it fits, when no preset is applied to another checkpoint (a bare
    preset loads its own model), or when the checkpoint's config or the preset's family is unknown here."""
    preset = engine.preset
    if preset is None or not engine.preset_on_target or not preset.family:
        return None
    try:
        family = (families if families is not None else load_families()).get(preset.family)
    except LabError:
        return None
    model = engine.model_source or engine.model_id
    checkpoint = read_checkpoint(model)
    if family is None or not checkpoint.known or fits(checkpoint, family):
        return None
    return (f"preset {preset.key} is made for {family.name} checkpoints, but {model} is {checkpoint.text()}: "
            f"its prompt rules, contract and server flags may not fit this model")


def spec_fit_warnings(specs: list[str]) -> list[str]:
    """`SPEC: warning` for each SPEC whose preset does not fit its checkpoint (the CLI prints them before it
    loads anything); SPECs that do not build here are left to the command's own errors."""
    from lab.engines.registry import create_engine

    lines = []
    for spec in specs:
        try:
            warning = fit_warning(create_engine(spec))
        except LabError:
            continue
        if warning:
            lines.append(f"{spec}: {warning}")
    return lines


def preset_status(engine: EngineBase) -> dict:
    """What the Engines tab and the prompt audit show of an engine's preset and checkpoint, computed once when
    the engine is added: `preset_changes` (lab.engines.preset_changes, [] without a preset), `preset_warning`
    (fit_warning) and `checkpoint` (its config.json's architecture, shown before the engine describes itself)."""
    from lab.engines.preset_changes import preset_changes

    if not engine.takes_preset:  # the kinds that load a checkpoint
        return {}
    model = engine.model_source or engine.model_id
    try:
        return {"preset_changes": preset_changes(engine), "preset_warning": fit_warning(engine),
                "checkpoint": read_checkpoint(model).text() or None}
    except Exception:  # noqa: BLE001 - a status line must never stop an engine from being added
        return {}
