"""What a visitor of a public lab may write to the shared store, switch by switch (issue: LAB_PUBLIC_ANNOTATIONS=1,
meant for tags, notes and saved slices, also let visitors Place and Take out runs in the owner's series, lasting
beyond the app). Every writer a visitor's click reaches is tried under each switch: it goes through only when
its own switch is on, and a write of no kind is refused whatever the switches say."""
from __future__ import annotations

import pytest

from lab.errors import LabError
from lab.security.visitor_writes import opened_kinds, refusal, write_kinds
from lab.serve import apply_public_policy, create_context
from lab.settings import Settings
from lab.store.series_members import join_series, leave_series, placements
from lab.triage.annotations import add_annotation, delete_annotation
from lab.triage.saved import delete_slice, list_slices, save_slice
from lab.triage.slices import SliceSpec
from lab.whatif import FieldEdit, WhatIf, field_text
from lab.whatif.store import DuckWhatIfStore
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT
from tests.ui.test_ui_handlers import write_stored_run

SWITCHES = ("LAB_PUBLIC_ANNOTATIONS", "LAB_PUBLIC_SERIES", "LAB_WHATIF_SHARED")
CONFIGS = [  # switches on -> kinds a visitor may write
    ((), set()),
    (("LAB_PUBLIC_ANNOTATIONS",), {"annotations", "slices"}),
    (("LAB_PUBLIC_SERIES",), {"series"}),
    (("LAB_WHATIF_SHARED",), {"whatif"}),
    (SWITCHES, {"annotations", "slices", "series", "whatif"}),
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("visitor-writes")
    results = make_results_dir(root)
    for name in ("owner-a", "owner-b"):
        write_stored_run(results / "runs" / f"{name}.json", name)
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT), public=False)
    ctx = create_context(settings, [])
    store = ctx.store
    run_id, key = store.rows("SELECT run_id, step_key FROM steps ORDER BY run_id, step_key LIMIT 1")[0]
    join_series(store, run_id, "owner series", 3)  # the owner's placement, made in the owner's lab
    owner_note = add_annotation(store, run_id, key, "owner-tag")
    save_slice(store, "owner slice", SliceSpec())
    DuckWhatIfStore(store)  # its tables
    yield ctx, run_id, key, owner_note
    store.close()


def writes(ctx, run_id: str, key: str, owner_note: int) -> dict[str, list]:
    """Each writer a visitor's click reaches, by its kind: (what it does, the call)."""
    store = ctx.store
    step = ctx.replay.by_key[key]
    edit = WhatIf(key, (FieldEdit("screen", field_text(step, "screen"), "visitor"),))
    return {
        "annotations": [("tag a step", lambda: add_annotation(store, run_id, key, "visitor-tag")),
                        ("delete the owner's tag", lambda: delete_annotation(store, owner_note))],
        "slices": [("save a slice", lambda: save_slice(store, "visitor slice", SliceSpec())),
                   ("delete the owner's slice", lambda: delete_slice(store, "owner slice"))],
        "series": [("Place a run", lambda: join_series(store, run_id, "visitor series", 1)),
                   ("Take the owner's run out", lambda: leave_series(store, run_id))],
        "whatif": [("save a what-if in the shared store", lambda: DuckWhatIfStore(store).save_edit(edit))],
        None: [("anything else", lambda: store.execute("DELETE FROM runs"))],
    }


def snapshot(store) -> tuple:
    return (placements(store), store.rows("SELECT id, tag FROM annotations ORDER BY id"), tuple(list_slices(store)),
            store.scalar("SELECT count(*) FROM whatif_edits"), store.scalar("SELECT count(*) FROM runs"))


@pytest.mark.parametrize("on, allowed", CONFIGS, ids=["none", "annotations", "series", "whatif", "all"])
def test_each_write_goes_through_only_with_its_own_switch(lab, monkeypatch, on, allowed):
    ctx, run_id, key, owner_note = lab
    for name in SWITCHES:
        monkeypatch.setenv(name, "1" if name in on else "0")
    ctx.settings.public = True
    ctx.settings.whatif_shared = "LAB_WHATIF_SHARED" in on  # the setting LAB_WHATIF_SHARED gives at start
    apply_public_policy(ctx)
    store = ctx.store
    try:
        assert store.visitor_kinds == allowed
        for kind, calls in writes(ctx, run_id, key, owner_note).items():
            for what, call in calls:
                before = snapshot(store)
                if kind in allowed:
                    call()
                    assert snapshot(store) != before, f"{what}: allowed, but nothing was written"
                    continue
                with pytest.raises(LabError) as caught:
                    call()
                assert str(caught.value) == refusal(kind), what
                if kind is not None:
                    assert f"{write_kinds()[kind].switch}=1" in str(caught.value), what
                assert snapshot(store) == before, f"{what} changed the store though refused"
    finally:
        store.refuse_writes, store.visitor_kinds = None, frozenset()
        ctx.settings.public = False
        # the owner puts back what an allowed visitor write changed
        join_series(store, run_id, "owner series", 3)
        store.execute("DELETE FROM annotations WHERE tag = 'visitor-tag'")
        store.execute("DELETE FROM whatif_edits")
        if not store.rows("SELECT 1 FROM annotations WHERE id = ?", [owner_note]):
            store.execute("INSERT INTO annotations (id, run_id, step_key, tag, created_at) VALUES (?, ?, ?, 'owner-tag', now())",
                          [owner_note, run_id, key])
        save_slice(store, "owner slice", SliceSpec())


def test_series_stay_the_owners_under_the_annotations_switch(lab, monkeypatch):
    """The issue's case: tags and notes open, series placements closed; the owner's placement is kept."""
    ctx, run_id, _, _ = lab
    monkeypatch.setenv("LAB_PUBLIC_ANNOTATIONS", "1")
    monkeypatch.delenv("LAB_PUBLIC_SERIES", raising=False)
    settings = Settings(results_dir=ctx.settings.results_dir, public=True, whatif_shared=False)
    assert opened_kinds(settings) == {"annotations", "slices"}
    ctx.store.refuse_writes, ctx.store.visitor_kinds = refusal(None), opened_kinds(settings)
    try:
        for call in (lambda: join_series(ctx.store, run_id, "mine", 0), lambda: leave_series(ctx.store, run_id)):
            with pytest.raises(LabError, match="series placements .*LAB_PUBLIC_SERIES=1"):
                call()
        assert placements(ctx.store)[run_id][:2] == ("owner series", 3)
    finally:
        ctx.store.refuse_writes, ctx.store.visitor_kinds = None, frozenset()


def test_derived_data_is_written_whatever_the_switches(lab):
    """Triage's flags and the equivalence columns are the lab's own: a public store still refreshes them."""
    ctx, _, _, _ = lab
    ctx.store.refuse_writes = refusal(None)
    try:
        with ctx.store.derived_writes():
            ctx.store.execute("UPDATE runs SET display_name = display_name")
        with ctx.store.writes("series"), ctx.store.derived_writes():  # derived wins over a kind, as before
            ctx.store.execute("UPDATE runs SET display_name = display_name")
        with pytest.raises(LabError):
            with ctx.store.writes("no such kind"):
                ctx.store.execute("DELETE FROM runs")
    finally:
        ctx.store.refuse_writes = None


def test_every_switch_is_documented_and_in_the_environment_reference():
    import subprocess
    import sys

    from tests.paths import REPO

    reference = subprocess.run([sys.executable, "scripts/docs_gen.py", "environment"], cwd=REPO, capture_output=True,
                               text=True, timeout=120, check=True).stdout
    security, space = ((REPO / "docs" / page).read_text(encoding="utf-8") for page in ("security.md", "space.md"))
    for kind in write_kinds().values():
        assert f"`{kind.switch}`" in reference and kind.switch in security and kind.switch in space, kind
