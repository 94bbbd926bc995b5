"""`LAB_ALLOW_ENGINES=1` on a public deployment still confines (issue 9, defect 3), and visitors'
tags and notes are off unless the owner allows them.

Real parts: the lab's context as `create_context` builds it, a real HTTP server on 127.0.0.1
that counts the requests it gets, a real DuckDB store.
"""
from __future__ import annotations

import http.server

import pytest

from lab.engines.admission import Admission, check_endpoint
from lab.errors import EngineSpecError, LabError
from lab.settings import Settings
from tests.helpers_servers import http_on_loopback
from tests.paths import EXCERPT
from tests.helpers_store import make_results_dir
from tests.ui.test_ui_handlers import write_stored_run


def make_ctx(tmp_path, *, public: bool, allow: bool, open_db: bool = False):
    from lab.serve import create_context

    results = make_results_dir(tmp_path)
    write_stored_run(results / "runs" / "inside.json", "inside")
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=tmp_path / "lab.duckdb",
                        cache_dir=tmp_path / "cache", replay_path=str(EXCERPT), public=public,
                        allow_engine_loading=allow)
    return create_context(settings, open_db=open_db)


@pytest.fixture
def counting_server():
    """A real HTTP server on 127.0.0.1 that records every request path it receives."""
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            hits.append(self.path)
            self.send_response(404)
            self.end_headers()

        do_POST = do_GET  # noqa: N815

        def log_message(self, *args):
            pass

    with http_on_loopback(Handler) as url:
        yield url, hits


def test_stored_stays_inside_the_data_folders_with_engines_allowed(tmp_path):
    from lab.ui.engines.tab import add_engine_action

    outside = tmp_path / "outside.json"
    write_stored_run(outside, "outside")
    ctx = make_ctx(tmp_path, public=True, allow=True)
    try:
        existing = add_engine_action(ctx, f"stored:{outside}")
        missing = add_engine_action(ctx, f"stored:{tmp_path / 'nowhere.json'}")
        passwd = add_engine_action(ctx, "stored:/etc/passwd")
        nothing = add_engine_action(ctx, "stored:/etc/no-such-file")
        escape = add_engine_action(ctx, f"stored:{ctx.settings.runs_dir}/../../outside.json")
        for action in (existing, missing, passwd, nothing, escape):
            assert not action.ok and "outside the data folders" in action.message
            assert str(tmp_path) not in action.message and "/etc" not in action.message
        # the messages say nothing about whether the outside file exists
        assert existing.message.replace("outside.json", "X") == missing.message.replace("nowhere.json", "X")
        assert passwd.message.replace("passwd", "X") == nothing.message.replace("no-such-file", "X")
        assert add_engine_action(ctx, f"stored:{ctx.settings.runs_dir / 'inside.json'}").ok
        ctx.pool.wait()
        assert [e.name for e in ctx.engine_entries()] == ["inside"]
    finally:
        ctx.pool.close_all()


def test_openai_to_internal_addresses_is_refused(tmp_path, counting_server, monkeypatch):
    from lab.ui.engines.tab import add_engine_action

    base, hits = counting_server
    monkeypatch.delenv("LAB_ENGINE_HOSTS", raising=False)
    ctx = make_ctx(tmp_path, public=True, allow=True)
    try:
        for spec in (f"openai:{base}/v1#m", f"openai:{base.replace('127.0.0.1', 'localhost')}/v1#m",
                     "openai:http://169.254.169.254/v1#m", "openai:http://10.1.2.3:8000/v1#m",
                     "openai:http://[::1]:9/v1#m", "openai:http://[::ffff:127.0.0.1]:9/v1#m"):
            action = add_engine_action(ctx, spec)
            assert not action.ok and "LAB_ENGINE_HOSTS" in action.message, (spec, action.message)
        ctx.pool.wait()
        assert hits == []  # not a single request reached the internal server
        assert ctx.engine_entries() == []
    finally:
        ctx.pool.close_all()


def test_owner_listed_hosts_and_local_mode_are_unchanged(tmp_path, counting_server, monkeypatch):
    from lab.ui.engines.tab import add_engine_action

    base, hits = counting_server
    monkeypatch.setenv("LAB_ENGINE_HOSTS", "127.0.0.1")
    assert Admission(public=True).allowed_hosts == frozenset({"127.0.0.1"})
    check_endpoint(f"{base}/v1", frozenset({"127.0.0.1"}))  # listed: admitted
    with pytest.raises(EngineSpecError):
        check_endpoint(f"{base.replace('127.0.0.1', 'localhost')}/v1", frozenset({"127.0.0.1"}))
    monkeypatch.delenv("LAB_ENGINE_HOSTS")
    ctx = make_ctx(tmp_path, public=False, allow=True)  # the owner's local lab: anything goes, as before
    try:
        assert add_engine_action(ctx, f"openai:{base}/v1#m").ok
        ctx.pool.wait()
        assert hits  # the local lab did contact its local server
        outside = tmp_path / "outside.json"
        write_stored_run(outside, "outside")
        assert add_engine_action(ctx, f"stored:{outside}").ok
    finally:
        ctx.pool.close_all()


def test_visitors_tags_and_notes_are_off_unless_the_owner_allows(tmp_path, monkeypatch):
    from lab.triage.annotations import add_annotation
    from lab.serve import apply_public_policy

    monkeypatch.delenv("LAB_PUBLIC_ANNOTATIONS", raising=False)
    ctx = make_ctx(tmp_path, public=True, allow=False, open_db=True)
    run_id, key = ctx.store.rows("SELECT run_id, step_key FROM steps LIMIT 1")[0]
    with pytest.raises(LabError, match="LAB_PUBLIC_ANNOTATIONS=1"):
        add_annotation(ctx.store, run_id, key, "wrong-path", "a note")
    with pytest.raises(LabError, match="does not let visitors write"):
        ctx.store.execute("DELETE FROM runs")
    assert ctx.store.scalar("SELECT count(*) FROM runs") == 1
    ctx.store.close()

    monkeypatch.setenv("LAB_PUBLIC_ANNOTATIONS", "1")
    ctx.store.refuse_writes = None
    apply_public_policy(ctx)
    assert ctx.store.visitor_kinds == {"annotations", "slices"}  # tags, notes, slices: not series, not the rest
    assert add_annotation(ctx.store, run_id, key, "wrong-path", "a note") > 0
    with pytest.raises(LabError, match="does not let visitors write"):
        ctx.store.execute("DELETE FROM runs")
    ctx.store.close()


def test_a_closed_session_unloads_only_its_own_engines(tmp_path):
    """The unload hook (a visitor's tab closed) removes that visitor's engines from the pool."""
    import gradio as gr
    from gradio.context import LocalContext

    from lab.ui.shell.session import serve_requests

    ctx = make_ctx(tmp_path, public=True, allow=False)
    serve_requests(ctx)  # as the app does: the workspace asks Gradio who is asking
    inside = f"stored:{ctx.settings.runs_dir / 'inside.json'}"
    try:
        for session in ("alice", "bob"):
            token = LocalContext.request.set(gr.Request(session_hash=session))
            try:
                ctx.add_engine(inside, wait=True)
                assert [e.name for e in ctx.engine_entries()] == [ctx.engine_entries()[0].name]
            finally:
                LocalContext.request.reset(token)
        assert len(ctx.pool.names()) == 2 and ctx.engine_entries() == []  # the owner sees neither
        token = LocalContext.request.set(gr.Request(session_hash="alice"))
        try:
            ctx.end_session("alice")
            assert ctx.engine_entries() == []
        finally:
            LocalContext.request.reset(token)
        assert len(ctx.pool.names()) == 1  # bob's column is still loaded
    finally:
        ctx.pool.close_all()


def test_the_app_tells_the_workspace_who_is_asking(tmp_path):
    """The workspace sits below the UI and reads no Gradio request itself: the app passes it Gradio's readers
    when it builds the UI, so each visitor's engines are that visitor's (outside a request: the owner)."""
    import gradio as gr
    from gradio.context import LocalContext

    from lab.ui.app import build_app
    from lab.ui.shell.session import current_client, current_session

    ctx = make_ctx(tmp_path, public=True, allow=False)
    try:
        token = LocalContext.request.set(gr.Request(session_hash="alice"))
        try:
            assert ctx.current_session() is None  # not wired yet: it cannot tell
        finally:
            LocalContext.request.reset(token)
        build_app(ctx)
        assert (ctx.current_session, ctx.current_client) == (current_session, current_client)
        token = LocalContext.request.set(gr.Request(session_hash="alice"))
        try:
            assert ctx.current_session() == "alice"
        finally:
            LocalContext.request.reset(token)
        assert ctx.current_session() is None
    finally:
        ctx.pool.close_all()
