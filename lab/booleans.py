"""Reading yes/no values typed by people (environment variables, SPEC options, URL parameters)."""
from __future__ import annotations

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


def parse_bool(value: object) -> bool | None:
    """True/False for a bool or a yes/no word (`1/true/yes/on`, `0/false/no/off`); None otherwise."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    return None
