"""Compare columns of legacy 386-step runs: answered on the legacy replay with the legacy scorer.

A legacy run's step is looked up by key in the legacy replay (`lab.data.legacy_replay`, mode
"all"), scored there with the legacy scorer, and shown beside the loaded replay's step. A step of
the loaded replay that the legacy replay lacks is "not in this run" with the reason. Without a
legacy replay the column keeps the legacy scorer on the loaded step and says it is an approximation.
"""
from __future__ import annotations

from lab.data.legacy_replay import GET_IT, load_legacy_replay, missing_legacy_replay_message
from lab.data.replay import ReplaySet
from lab.data.step import Step
from lab.errors import LabError
from lab.runs.pipeline import run_steps
from lab.security.paths import display_path, redact_paths
from lab.tb2lite import CORRECTED, LEGACY
from lab.workspace import EngineEntry, LabContext
from lab.ui.shell.html_text import esc
from lab.ui.compare.step_view import ABSENT, ERROR, EngineView, engine_view_from_result, engine_view_state

LEGACY_SCORER = LEGACY


def is_legacy(entry: EngineEntry) -> bool:
    """Whether the column is a stored run scored with the legacy scorer."""
    return entry.engine is not None and entry.engine.scorer == LEGACY_SCORER


def legacy_replay_of(ctx: LabContext) -> tuple[ReplaySet | None, str | None]:
    """The legacy replay (or None) and a problem reading it (or None)."""
    try:
        return load_legacy_replay(ctx.settings), None
    except LabError as exc:
        return None, redact_paths(str(exc), ctx.settings)


def answer_legacy_step(ctx: LabContext, entry: EngineEntry, step: Step) -> EngineView:
    """A legacy column for the loaded replay's `step`, cached like any column (errors are not)."""
    legacy, problem = legacy_replay_of(ctx)
    if problem is not None:
        return engine_view_state(entry.spec, entry.name, ERROR, problem, entry.kind)
    target = step if legacy is None else legacy.by_key.get(step.key)
    if target is None:
        view = engine_view_state(entry.spec, entry.name, ABSENT, (
            f"step {step.key} is not in the legacy 386-step replay ({display_path(legacy.path, ctx.settings)}): "
            "this legacy run was never "
            "asked it"), entry.kind)
    else:
        try:
            result = run_steps(entry.engine, [target], scorer=LEGACY_SCORER)[0]
        except Exception as exc:  # noqa: BLE001 - an engine's failure is shown in its column
            return engine_view_state(entry.spec, entry.name, ERROR, f"{type(exc).__name__}: {exc}", entry.kind)
        view = engine_view_from_result(entry.spec, entry.name, result, entry.kind)
    ctx.views.put((entry.name, step.key), view)
    return view


def replay_label(ctx: LabContext, entry: EngineEntry) -> tuple[str, str]:
    """(short text, longer title) naming the replay and scorer a stored column is compared on; a replay's
    path as the header shows it (relative to the data folders, else its file name: never the server's path)."""
    loaded = display_path(ctx.replay.path, ctx.settings) if ctx.replay else "none"
    if not is_legacy(entry):
        return "corrected scorer · loaded replay", f"scored with the corrected scorer on the loaded replay ({loaded})"
    legacy, problem = legacy_replay_of(ctx)
    if legacy is None:
        return (f"legacy_386 · legacy scorer · APPROXIMATION on the loaded replay (no legacy replay: {GET_IT})",
                problem or missing_legacy_replay_message())
    extra = len(set(legacy.by_key) - set(ctx.replay.by_key)) if ctx.replay else len(legacy.by_key)
    return ("legacy_386 · legacy scorer · legacy 386-step replay",
            f"scored with the legacy scorer on the legacy replay {display_path(legacy.path, ctx.settings)} "
            f"({len(legacy.steps)} steps, mode all; "
            f"{extra} of them are not in the loaded replay {loaded} and are not shown)")


def scorer_badge_html(ctx: LabContext, entry: EngineEntry) -> str:
    """The badge of a stored column: which scorer and which replay it is compared on."""
    text, title = replay_label(ctx, entry)
    kind = LEGACY_SCORER if is_legacy(entry) else CORRECTED
    return f'<span class="lab-tag" data-scorer="{kind}" title="{esc(title)}">{esc(text)}</span>'
