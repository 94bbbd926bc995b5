"""Refuse to replay a legacy 386-step stored run on the corrected replay or with the corrected scorer.

A legacy run's answers belong to the legacy replay's steps (mode "all") and its numbers to the
legacy scorer; replaying it any other way writes a result that looks comparable but is not.
"""
from __future__ import annotations

from lab.engines.common import EngineBase

LEGACY_RULES = ("all", "legacy")  # (--mode, --scorer) a legacy run must be replayed with


def legacy_run_problem(engine: EngineBase, mode: str, scorer: str) -> str | None:
    """A one-line refusal when `engine` is a legacy stored run and (mode, scorer) are not the legacy
    ones; None otherwise."""
    if engine.scorer != "legacy":  # only a stored legacy run's answers are scored the legacy way
        return None
    if (mode, scorer) == LEGACY_RULES:
        return None
    from lab.data.legacy_replay import GET_IT, legacy_replay_path

    found = legacy_replay_path()
    found = found if found is not None and found.is_file() else None
    replay = str(found) if found is not None else "LEGACY.jsonl"
    get = "" if found is not None else f" (get it with `{GET_IT}`)"
    return (f"{engine.path} is a legacy 386-step run: replay it with "
            f"--replay {replay} --mode all --scorer legacy{get}")
