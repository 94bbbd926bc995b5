"""How a run was made, as its result file records it, and what differs between two runs: sampling, the
replay (its sha256, else the set of steps), the replay mode, the scorer, the chat template and prompt
options, the output contract, the engine, its version and dtype (the list, and which of them change the
answers, is data: run_settings.yaml). Every comparison of the lab (the `compare` command, Results, the
checkpoint series, Triage and Compare) reads both runs' settings through this module and shows the
differences in one line; `compare --max-drop` refuses to gate across one that changes answers."""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from lab.jsontext import one_line

SETTINGS_PATH = Path(__file__).with_name("run_settings.yaml")
WHEN_SAMPLED = "when_sampled"
SHOWN_CHARS = 40  # one value in a line


@dataclass(frozen=True)
class SettingSpec:
    """One entry of run_settings.yaml."""

    name: str
    label: str
    sources: tuple[str, ...] = ()
    changes_answers: bool | str = False
    default: Any = None
    fallback: str | None = None
    rest_of: str | None = None


@dataclass(frozen=True)
class SettingsTable:
    specs: dict[str, SettingSpec]
    ignore: dict[str, frozenset[str]]
    shown: int


@lru_cache(maxsize=2)
def load_settings_table(path: Path = SETTINGS_PATH) -> SettingsTable:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    specs = {name: SettingSpec(name=name, label=str(s["label"]), sources=tuple(s.get("from") or ()),
                               changes_answers=s.get("changes_answers", False), default=s.get("default"),
                               fallback=s.get("fallback"), rest_of=s.get("rest_of"))
             for name, s in raw["settings"].items()}
    ignore = {block: frozenset(keys) for block, keys in (raw.get("ignore") or {}).items()}
    return SettingsTable(specs, ignore, int(raw.get("shown", 6)))


def answer_changing_names() -> list[str]:
    """The settings whose difference can change the answers, in order (the choices of `--allow-mismatch`)."""
    return [name for name, spec in load_settings_table().specs.items() if spec.changes_answers]


def _spec_kind(value: Any) -> Any:
    """`transformers:/m?x=1` -> `transformers`; a spec without a kind stays as it is."""
    return value.split(":", 1)[0] if isinstance(value, str) and ":" in value else value


def _short(value: Any) -> Any:
    return value[:12] if isinstance(value, str) else value


TRANSFORMS: dict[str, Callable[[Any], Any]] = {"spec_kind": _spec_kind, "short": _short}


def _at(meta: dict, path: str) -> Any:
    value: Any = meta
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _recorded(value: Any) -> bool:
    return value is not None and value != {} and value != "" and value != []


def _source_value(meta: dict, source: str) -> Any:
    path, _, transform = source.partition(":")
    value = _at(meta, path)
    return TRANSFORMS[transform](value) if transform and _recorded(value) else value


def step_set(step_keys: Iterable[str]) -> str:
    """A set of steps in a few characters: its size and a hash of its sorted keys ("303 steps · 4f1c2a9b")."""
    keys = sorted(set(str(k) for k in step_keys))
    digest = hashlib.sha256("\n".join(keys).encode("utf-8")).hexdigest()[:8]
    return f"{len(keys)} steps · {digest}"


@dataclass(frozen=True)
class RunSettings:
    """A run's settings: name -> value (None: not recorded), the rest of each compared block, and its step set."""

    values: dict[str, Any]
    rest: dict[str, dict[str, Any]]
    steps: str


def run_settings(meta: dict, step_keys: Iterable[str]) -> RunSettings:
    """The settings of one run from its result file's top-level fields (`per_step` not needed: `step_keys`
    are its steps)."""
    table = load_settings_table()
    meta = meta if isinstance(meta, dict) else {}
    values: dict[str, Any] = {}
    rest: dict[str, dict[str, Any]] = {}
    named = {s.split(":", 1)[0] for spec in table.specs.values() for s in spec.sources}
    for spec in table.specs.values():
        if spec.rest_of:
            block = meta.get(spec.rest_of) if isinstance(meta.get(spec.rest_of), dict) else {}
            skip = table.ignore.get(spec.rest_of, frozenset())
            rest[spec.name] = {k: v for k, v in block.items()
                               if k not in skip and f"{spec.rest_of}.{k}" not in named and _recorded(v)}
            continue
        found = next((v for v in (_source_value(meta, s) for s in spec.sources) if _recorded(v)), None)
        values[spec.name] = found if found is not None else spec.default
    return RunSettings(values, rest, step_set(step_keys))


def shown(value: Any) -> str:
    """A setting's value in a line: numbers as written, mappings as compact JSON, long text cut."""
    if value is None:
        return "not recorded"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}" if math.isfinite(value) else str(value)
    if isinstance(value, (dict, list)):
        value = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return one_line(value, SHOWN_CHARS)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
        return float(a) == float(b)
    return a == b


@dataclass(frozen=True)
class SettingDifference:
    """One setting the two runs differ in (or that only one of them records)."""

    name: str
    label: str
    baseline: str
    candidate: str
    changes_answers: bool

    def text(self) -> str:
        return f"{self.label} {self.baseline} vs {self.candidate}"

    def to_dict(self) -> dict:
        return {"name": self.name, "label": self.label, "baseline": self.baseline, "candidate": self.candidate,
                "changes_answers": self.changes_answers}


@dataclass(frozen=True)
class SettingsDiff:
    """What differs between a baseline's and a candidate's settings, and what only one of them records."""

    differ: list[SettingDifference]
    not_recorded: list[str]  # labels of settings one run records and the other does not

    @property
    def changing(self) -> list[SettingDifference]:
        """The differences that change answers (what `compare --max-drop` refuses to gate across)."""
        return [d for d in self.differ if d.changes_answers]

    def line(self) -> str:
        """One line: "settings differ: temperature 0 vs 0.7 (changes answers), dtype bfloat16 vs float32"."""
        limit = load_settings_table().shown
        if not self.differ:
            head = "settings: no difference recorded"
        else:
            parts = [d.text() + (" (changes answers)" if d.changes_answers else "") for d in self.differ[:limit]]
            more = len(self.differ) - limit
            head = "settings differ: " + ", ".join(parts) + (f", +{more} more" if more > 0 else "")
        if self.not_recorded:
            head += f" · not recorded for one run: {', '.join(self.not_recorded[:limit])}" + \
                    (f" +{len(self.not_recorded) - limit}" if len(self.not_recorded) > limit else "")
        return head

    def short(self) -> str:
        """The differences alone, for a table cell ("same" when none is recorded)."""
        if not self.differ:
            return "same"
        limit = load_settings_table().shown
        more = len(self.differ) - limit
        return "; ".join(("⚠ " if d.changes_answers else "") + d.text() for d in self.differ[:limit]) + \
            (f"; +{more} more" if more > 0 else "")

    def to_dict(self) -> dict:
        return {"differ": [d.to_dict() for d in self.differ], "not_recorded": list(self.not_recorded),
                "line": self.line()}


def _sampled(a: RunSettings, b: RunSettings) -> bool:
    temps = [s.values.get("temperature") for s in (a, b)]
    return any(isinstance(t, (int, float)) and t > 0 for t in temps)


def compare_settings(baseline: RunSettings, candidate: RunSettings) -> SettingsDiff:
    """The settings the two runs differ in, in run_settings.yaml's order."""
    table = load_settings_table()
    differ: list[SettingDifference] = []
    unknown: list[str] = []
    sampled = _sampled(baseline, candidate)
    for spec in table.specs.values():
        changes = spec.changes_answers is True or (spec.changes_answers == WHEN_SAMPLED and sampled)
        if spec.rest_of:
            a, b = baseline.rest.get(spec.name, {}), candidate.rest.get(spec.name, {})
            for key in sorted(set(a) & set(b)):
                if not _same(a[key], b[key]):
                    differ.append(SettingDifference(spec.name, f"{spec.rest_of}.{key}", shown(a[key]), shown(b[key]),
                                                    changes))
            continue
        a, b = baseline.values.get(spec.name), candidate.values.get(spec.name)
        if (a is None or b is None) and spec.fallback == "step_set":
            if baseline.steps != candidate.steps:
                differ.append(SettingDifference(spec.name, f"{spec.label} steps (no sha256 recorded)",
                                                baseline.steps, candidate.steps, changes))
            elif a is not None or b is not None:
                unknown.append(f"{spec.label} sha256")
            continue
        if a is None and b is None:
            continue
        if a is None or b is None:
            unknown.append(spec.label)
        elif not _same(a, b):
            differ.append(SettingDifference(spec.name, spec.label, shown(a), shown(b), changes))
    return SettingsDiff(differ, unknown)
