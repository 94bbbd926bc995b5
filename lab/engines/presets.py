"""Model presets (assets/models.yaml): the systems of DESIGN §2 with their published settings."""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from pathlib import Path

import yaml

from lab.engines.base import Sampling
from lab.errors import EngineSpecError
from lab.tb2lite import DEFAULT_CONTRACT

PRESETS_PATH = Path(__file__).resolve().parents[2] / "assets" / "models.yaml"

KNOWN_KINDS = ("vllm", "transformers")
PROMPT_OPTION_KEYS = ("thinking_mode", "strip_thinking_history", "gemma4_empty_thought_channel")
PROMPT_OPTION_VALUES = {"on", "off", "auto", "true", "false", "1", "0", "yes", "no", "enabled", "disabled"}
ENGINE_KEYS = (
    "dtype",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "max_model_len",
    "gpu_memory_utilization",
    "language_model_only",
    "enable_prefix_caching",
    "max_lora_rank",
    "enforce_eager",
    "max_num_seqs",
)
PRESET_KEYS = {
    "display_name", "hf_id", "lora", "kind", "contract", "prompt_options", "sampling", "engine",
    "trust_remote_code", "published", "notes", "family",
}
DEFAULT_PROMPT_OPTIONS = {key: "auto" for key in PROMPT_OPTION_KEYS}


@dataclass(frozen=True)
class Preset:
    """One named system: which model to load, how to prompt it, how to sample, what was published."""

    key: str
    display_name: str
    hf_id: str
    kind: str = "vllm"
    lora: str | None = None
    contract: str = DEFAULT_CONTRACT
    prompt_options: dict = field(default_factory=lambda: dict(DEFAULT_PROMPT_OPTIONS))
    sampling: Sampling = field(default_factory=Sampling)
    engine: dict = field(default_factory=dict)
    trust_remote_code: bool = False
    published: dict = field(default_factory=dict)
    notes: str = ""
    family: str = ""


def _merge(base: dict, over: dict) -> dict:
    """Deep-merge two mappings (nested maps merge, other values replace)."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _fail(path: Path, key: str, problem: str) -> EngineSpecError:
    return EngineSpecError(f"{path}: preset '{key}': {problem}")


def _sampling_from(raw: dict, path: Path, key: str) -> Sampling:
    if not isinstance(raw, dict):
        raise _fail(path, key, "'sampling' must be a mapping")
    allowed = {f.name for f in fields(Sampling)}
    unknown = set(raw) - allowed
    if unknown:
        raise _fail(path, key, f"unknown sampling field(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
    try:
        sampling = Sampling(**raw)
        sampling.temperature = float(sampling.temperature)
        sampling.top_p = float(sampling.top_p)
        sampling.max_tokens = int(sampling.max_tokens)
        sampling.repetition_penalty = float(sampling.repetition_penalty)
        sampling.min_p = float(sampling.min_p)
    except (TypeError, ValueError) as exc:
        raise _fail(path, key, f"bad sampling value: {exc}") from None
    if sampling.temperature < 0 or not 0 < sampling.top_p <= 1 or sampling.max_tokens < 1:
        raise _fail(path, key, "sampling needs temperature >= 0, 0 < top_p <= 1 and max_tokens >= 1")
    return sampling


def preset_from_dict(key: str, raw: dict, path: Path) -> Preset:
    """Validate one merged preset mapping and build the Preset (errors name file and key)."""
    if not isinstance(raw, dict):
        raise _fail(path, key, "must be a mapping of fields")
    unknown = set(raw) - PRESET_KEYS
    if unknown:
        raise _fail(path, key, f"unknown field(s) {sorted(unknown)}; allowed: {sorted(PRESET_KEYS)}")
    hf_id = raw.get("hf_id")
    if not isinstance(hf_id, str) or not hf_id.strip():
        raise _fail(path, key, "'hf_id' is required (a Hugging Face model id or a local folder)")
    kind = raw.get("kind", "vllm")
    if kind not in KNOWN_KINDS:
        raise _fail(path, key, f"'kind' must be one of {list(KNOWN_KINDS)}, got '{kind}'")
    options = raw.get("prompt_options") or {}
    if not isinstance(options, dict) or set(options) - set(PROMPT_OPTION_KEYS):
        raise _fail(path, key, f"'prompt_options' may only set {list(PROMPT_OPTION_KEYS)}")
    for name, value in options.items():
        if str(value).lower() not in PROMPT_OPTION_VALUES:
            raise _fail(path, key, f"prompt option '{name}' must be on, off or auto, got '{value}'")
    engine = raw.get("engine") or {}
    if not isinstance(engine, dict) or set(engine) - set(ENGINE_KEYS):
        bad = sorted(set(engine) - set(ENGINE_KEYS)) if isinstance(engine, dict) else engine
        raise _fail(path, key, f"unknown engine setting(s) {bad}; allowed: {list(ENGINE_KEYS)}")
    trust = raw.get("trust_remote_code", False)
    if not isinstance(trust, bool):
        raise _fail(path, key, "'trust_remote_code' must be true or false")
    published = raw.get("published") or {}
    if not isinstance(published, dict):
        raise _fail(path, key, "'published' must be a mapping")
    return Preset(
        key=key,
        display_name=str(raw.get("display_name") or key),
        hf_id=hf_id.strip(),
        kind=kind,
        lora=raw.get("lora") or None,
        contract=str(raw.get("contract") or DEFAULT_CONTRACT),
        prompt_options={**DEFAULT_PROMPT_OPTIONS, **{k: str(v) for k, v in options.items()}},
        sampling=_sampling_from(raw.get("sampling") or {}, path, key),
        engine=dict(engine),
        trust_remote_code=trust,
        published=dict(published),
        notes=" ".join(str(raw.get("notes") or "").split()),
        family=str(raw.get("family") or ""),
    )


@dataclass(frozen=True)
class Family:
    """A model family (assets/models.yaml `families`): the config.json values its checkpoints carry."""

    name: str
    model_types: tuple[str, ...] = ()
    architectures: tuple[str, ...] = ()


def _names(raw: object, path: Path, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(v, str) and v.strip() for v in raw):
        raise EngineSpecError(f"{path}: {where} must be a list of names")
    return tuple(v.strip() for v in raw)


def families_from(data: dict, path: Path) -> dict[str, Family]:
    """The `families` table of a parsed presets file (empty when it has none)."""
    raw = data.get("families") or {}
    if not isinstance(raw, dict):
        raise EngineSpecError(f"{path}: 'families' must be a mapping of family names")
    families = {}
    for name, body in raw.items():
        if not isinstance(body, dict) or set(body) - {"model_types", "architectures"}:
            raise EngineSpecError(f"{path}: family '{name}': give model_types and architectures (lists of names)")
        families[str(name)] = Family(str(name), _names(body.get("model_types"), path, f"family '{name}' model_types"),
                                     _names(body.get("architectures"), path, f"family '{name}' architectures"))
    return families


def load_families(path: str | Path | None = None) -> dict[str, Family]:
    """The model families of the presets file (default assets/models.yaml)."""
    path = Path(path) if path is not None else PRESETS_PATH
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise EngineSpecError(f"cannot read presets file {path}: {exc}") from None
    return families_from(data if isinstance(data, dict) else {}, path)


def load_engine_defaults(path: str | Path | None = None) -> dict:
    """The `defaults.engine` block of the presets file: settings for models without a preset."""
    path = Path(path) if path is not None else PRESETS_PATH
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise EngineSpecError(f"cannot read presets file {path}: {exc}") from None
    engine = (data.get("defaults") or {}).get("engine") or {}
    if not isinstance(engine, dict) or set(engine) - set(ENGINE_KEYS):
        raise EngineSpecError(f"{path}: 'defaults.engine' may only set {list(ENGINE_KEYS)}")
    return dict(engine)


def load_presets(path: str | Path | None = None) -> dict[str, Preset]:
    """Read and validate the presets file (default assets/models.yaml)."""
    path = Path(path) if path is not None else PRESETS_PATH
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise EngineSpecError(f"cannot read presets file {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise EngineSpecError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("presets"), dict):
        raise EngineSpecError(f"{path}: expected a top-level 'presets:' mapping of preset names")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise EngineSpecError(f"{path}: 'defaults' must be a mapping")
    families = families_from(data, path)
    presets: dict[str, Preset] = {}
    for key, raw in data["presets"].items():
        key = str(key)
        if ":" in key or "?" in key or not key.strip():
            raise _fail(path, key, "preset names may not contain ':' or '?'")
        if not isinstance(raw, dict):
            raise _fail(path, key, "must be a mapping of fields")
        presets[key] = preset_from_dict(key, _merge(defaults, raw), path)
        family = presets[key].family
        if families and family and family not in families:
            raise _fail(path, key, f"family '{family}' is not in 'families' ({', '.join(families)})")
    return presets
