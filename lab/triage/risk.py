"""Risky and hanging keystrokes: flag predicted units and commands from the patterns data file."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

from lab.errors import LabError

RISK_PATTERNS_PATH = Path(__file__).with_name("risk_patterns.yaml")
RISK_CATEGORIES = ("destructive", "hang")


@dataclass(frozen=True)
class RiskPattern:
    """One named pattern: it matches a unit when `regex` is found and `unless` is not."""

    name: str
    category: str
    regex: re.Pattern
    unless: re.Pattern | None = None
    description: str = ""

    def matches(self, unit: str) -> bool:
        return bool(self.regex.search(unit)) and not (self.unless and self.unless.search(unit))


@dataclass(frozen=True)
class RiskPatterns:
    """All patterns of the data file, plus the newline exemptions and the duration limit."""

    patterns: tuple[RiskPattern, ...]
    newline_exempt: tuple[re.Pattern, ...]
    long_duration_s: float
    any_pattern: re.Pattern | None = None  # every regex in one alternation: a fast "nothing here" check
    # unit -> its flags: runs of similar models repeat most units, and the regexes are the cost
    memo: dict = field(default_factory=dict, compare=False, hash=False, repr=False)


@dataclass
class StepRisk:
    """Risk flags of one step. `flags` holds `destructive:NAME`, `hang:NAME`, `no_newline`, `long_duration`."""

    risky: bool = False
    hang: bool = False
    no_newline: bool = False
    long_duration: bool = False
    flags: list[str] = field(default_factory=list)


def _compile(text: str, where: str) -> re.Pattern:
    try:
        return re.compile(text)
    except re.error as exc:
        raise LabError(f"{where}: invalid regex {text!r}: {exc}; fix the pattern in the risk file") from None


@lru_cache(maxsize=8)
def load_risk_patterns(path: str | Path = RISK_PATTERNS_PATH) -> RiskPatterns:
    """Read and compile the risk patterns file (cached per path)."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise LabError(f"{p}: cannot read risk patterns: {exc}") from None
    patterns: list[RiskPattern] = []
    for category in RISK_CATEGORIES:
        for i, entry in enumerate(data.get(category) or []):
            where = f"{p} {category}[{i}]"
            if not isinstance(entry, dict) or not entry.get("name") or not entry.get("regex"):
                raise LabError(f"{where}: each pattern needs 'name' and 'regex'")
            patterns.append(
                RiskPattern(
                    name=str(entry["name"]),
                    category=category,
                    regex=_compile(str(entry["regex"]), f"{where} field 'regex'"),
                    unless=_compile(str(entry["unless"]), f"{where} field 'unless'") if entry.get("unless") else None,
                    description=str(entry.get("description", "")),
                )
            )
    exempt = tuple(_compile(str(r), f"{p} newline_exempt") for r in data.get("newline_exempt") or [])
    union = re.compile("|".join(f"(?:{p.regex.pattern})" for p in patterns)) if patterns else None
    return RiskPatterns(tuple(patterns), exempt, float(data.get("long_duration_s", 60)), union)


def unit_risks(unit: str, patterns: RiskPatterns | None = None) -> list[str]:
    """Flags (`destructive:NAME` / `hang:NAME`) of one command unit."""
    pats = patterns or load_risk_patterns()
    flags = pats.memo.get(unit)
    if flags is None:
        if pats.any_pattern is None or not pats.any_pattern.search(unit):
            flags = ()
        else:
            flags = tuple(f"{p.category}:{p.name}" for p in pats.patterns if p.matches(unit))
        if len(pats.memo) < 500_000:
            pats.memo[unit] = flags
    return list(flags)


def command_risks(commands: list | None, patterns: RiskPatterns | None = None) -> list[str]:
    """`no_newline` / `long_duration` from the parsed JSON `commands` (raw keystrokes and durations)."""
    pats = patterns or load_risk_patterns()
    flags: list[str] = []
    for command in commands or []:
        if not isinstance(command, dict):
            continue
        keys = command.get("keystrokes")
        if isinstance(keys, str) and not keys.endswith(("\n", "\r")):
            if not any(rx.search(keys) for rx in pats.newline_exempt):
                flags.append("no_newline")
        duration = command.get("duration")
        if isinstance(duration, (int, float)) and not isinstance(duration, bool):
            if duration > pats.long_duration_s:
                flags.append("long_duration")
    return flags


def assess_step(units: list[str], commands: list | None, patterns: RiskPatterns | None = None) -> StepRisk:
    """All risk flags of one step's predicted units and (where parseable) its JSON commands."""
    pats = patterns or load_risk_patterns()
    found: list[str] = []
    for unit in units:
        found.extend(unit_risks(unit, pats))
    found.extend(command_risks(commands, pats))
    flags = list(dict.fromkeys(found))  # unique, in first-seen order
    return StepRisk(
        risky=any(f.startswith("destructive:") for f in flags),
        hang=any(f.startswith("hang:") for f in flags),
        no_newline="no_newline" in flags,
        long_duration="long_duration" in flags,
        flags=flags,
    )
