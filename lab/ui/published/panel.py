"""Results tab panel: fetch published per-step runs (a series, or all) with the download size shown.

On a public Space the owner's set (LAB_PUBLISHED, fetched at build or start) is listed instead of
the button: visitors simply see those runs in Compare and Triage."""
from __future__ import annotations

import gradio as gr

from lab.errors import LabError
from lab.workspace import LabContext
from lab.ui.shell.html_text import esc

ALL = "all published runs"
TYPICAL_FULL_MB = 1.5  # a full 303-step published result file is about 1.5 MB


SERIES, RUN = "series: ", "run: "


def series_choices() -> list[str]:
    """All runs, each series, then each run (type to filter)."""
    from lab.published.catalogue import load_catalogue, runs_of, series_names

    try:
        entries = load_catalogue()
    except LabError:
        return []
    return [ALL, *(SERIES + s for s in series_names(entries)), *(RUN + k for k in sorted(runs_of(entries)))]


def selection(picked: list[str]):
    from lab.published.fetch import select_runs

    if not picked:
        return []
    if ALL in picked:
        return select_runs(all_runs=True)
    series = [p.removeprefix(SERIES) for p in picked if p.startswith(SERIES)]
    names = [p.removeprefix(RUN) for p in picked if p.startswith(RUN)]
    return select_runs(series=series, names=names)


def size_text(ctx: LabContext, picked: list[str]) -> str:
    """'N runs · X MB to download' (cached files excluded; unknown sizes estimated and said so)."""
    from lab.published.cache import Cache

    try:
        runs = selection(picked)
    except LabError as exc:
        return f'<div class="lab-muted">{esc(exc)}</div>'
    if not runs:
        return '<div class="lab-muted" id="lab-pub-size">pick a series (or all) to see the download size</div>'
    cache = Cache(ctx.settings.cache_dir)
    files = [f for r in runs for f in r.files if not cache.file(f).is_file()]
    known = [cache.known(f).get("size") or f.size for f in files]
    exact = sum(s for s in known if s)
    unknown = sum(1 for s in known if not s)
    estimate = exact / 1e6 + unknown * TYPICAL_FULL_MB
    size = f"{exact / 1e6:.2f} MB" if not unknown else f"about {estimate:.0f} MB ({unknown} file sizes not known before the first fetch; ~{TYPICAL_FULL_MB} MB each)"
    return (f'<div class="lab-muted" id="lab-pub-size"><b>{len(runs)} runs</b> · {len(files)} files to download · '
            f'{size}</div>')


def owner_set_html(ctx: LabContext) -> str:
    """The published runs already in the store (what visitors of a Space see)."""
    if ctx.store is None:
        return ""
    try:
        df = ctx.query("SELECT count(*) AS n, count(DISTINCT p.series) AS s FROM runs r "
                       "LEFT JOIN published_runs p USING (run_id) WHERE r.source = 'published'")
    except Exception:  # noqa: BLE001 - published_runs appears with the first fetch
        df = ctx.query("SELECT count(*) AS n, 0 AS s FROM runs WHERE source = 'published'")
    n, s = int(df.iloc[0]["n"]), int(df.iloc[0]["s"])
    return (f'<div class="lab-muted" id="lab-pub-have">{n} published runs in the store ({s} series): pick them in '
            "Compare's run picker or in Triage</div>")


def build_published_panel(ctx: LabContext) -> None:
    """The accordion; on a public deployment without engine loading, a read-only note."""
    with gr.Accordion("Fetch published per-step runs", open=False, elem_id="lab-pub"):
        gr.Markdown("The public harness's per-step result files (`LLM-OS-Models/Terminal`, "
                    "`tb2_lite/results/`), from the commits listed in `assets/published/catalogue.csv`. "
                    "CLI: `python -m lab data published list | fetch`.")
        have = gr.HTML(owner_set_html(ctx))
        if ctx.settings.public and not ctx.settings.allow_engine_loading:
            gr.Markdown("On this Space the owner picked the published runs at build or start time (`LAB_PUBLISHED`).")
            return
        with gr.Row(equal_height=True):
            picked = gr.Dropdown(series_choices(), multiselect=True, value=[], scale=4, elem_id="lab-pub-series",
                                 label="series or runs to fetch (type to filter)")
            go = gr.Button("Fetch published per-step runs", scale=1, variant="primary", elem_id="lab-pub-fetch")
        size = gr.HTML(size_text(ctx, []))
        status = gr.HTML(elem_id="lab-pub-status")

    def on_fetch(names: list[str], progress=gr.Progress()):
        from lab.published.download import fetch_entries
        from lab.published.fetch import fetch_and_import

        if ctx.settings.public:  # it would write into the owner's results/published and the store
            gr.Warning("This public deployment does not let visitors fetch published runs; the owner "
                       "chooses them with LAB_PUBLISHED")
            return gr.update(), gr.update(), gr.update()
        if ctx.store is None:
            gr.Warning(ctx.store_error or "the results database is not open")
            return gr.update(), gr.update(), gr.update()
        try:
            runs = selection(list(names or []))
        except LabError as exc:
            gr.Warning(str(exc))
            return gr.update(), gr.update(), gr.update()
        if not runs:
            gr.Info("Pick a series (or all published runs) first.")
            return gr.update(), gr.update(), gr.update()

        files = [f for r in runs for f in r.files]
        state = {"files": f"0/{len(files)} files"}

        def on_progress(done: int, total: int | None) -> None:
            progress((done, total) if total else None, desc=f"downloading: {state['files']}", unit="bytes")

        def on_file(n_done: int, n_files: int, path: str) -> None:  # per file, not only one byte counter
            state["files"] = f"{n_done}/{n_files} files (last: {path.rsplit('/', 1)[-1]})"
            progress((n_done, n_files), desc=f"downloading: {state['files']}", unit="files")

        # download without holding the store (other tabs keep working), then import from the cache
        fetched = fetch_entries(files, ctx.settings.cache_dir, progress=False, on_progress=on_progress,
                                on_file=on_file)
        progress(None, desc=f"importing {len(runs)} run{'s' if len(runs) != 1 else ''} into the store")
        with ctx.store_session() as store:
            report = fetch_and_import(store, runs, ctx.settings.cache_dir, ctx.settings.results_dir,
                                      progress=False, on_progress=on_progress)
        report.fetch.downloaded, report.fetch.resumed = fetched.downloaded, fetched.resumed
        report.fetch.cached = [p for p in report.fetch.cached if p not in set(fetched.downloaded)]
        from lab.triage import refresh_step_flags

        with ctx.store_session() as store:
            refresh_step_flags(store)
        lines = esc(report.summary()).replace("\n", "<br>")
        (gr.Info if report.ok else gr.Warning)(report.summary().splitlines()[0])
        return f'<div class="lab-muted">{lines}</div>', owner_set_html(ctx), size_text(ctx, list(names or []))

    picked.change(lambda names: size_text(ctx, list(names or [])), picked, size, api_visibility="private",
                  show_progress="hidden")
    go.click(on_fetch, picked, [status, have, size], api_name="fetch_published")
