"""A visitor never sees a control refused to them (issue 29): a public deployment with no replay shows no
download button, and Compare says in one line that the owner has not configured the replay and what a
visitor can still do; the owner's own lab keeps the button. A real Gradio server, read as a browser does."""
from __future__ import annotations

import re

import httpx
import pytest

from lab.settings import Settings
from lab.serve import create_context
from tests.helpers_servers import serve_lab
from tests.public.test_public_hostile import private_call
from tests.helpers_store import make_results_dir

pytestmark = pytest.mark.slow


def _component(config: dict, elem_id: str) -> dict:
    return next(c for c in config["components"] if (c.get("props") or {}).get("elem_id") == elem_id)


def _notice(config: dict) -> str:
    """The Compare notice (the HTML component shown above the download button)."""
    html = [c for c in config["components"] if c.get("type") == "html"
            and "No replay data configured" in str((c.get("props") or {}).get("value"))]
    assert len(html) == 1, "one notice"
    return html[0]["props"]["value"]


def _lab(tmp_path, public: bool):
    cache = tmp_path / "cache"
    settings = Settings(results_dir=make_results_dir(tmp_path), db_path=tmp_path / "lab.duckdb", cache_dir=cache,
                        replay_path=None, public=public)
    ctx = create_context(settings)
    assert ctx.replay is None
    return ctx


def test_a_visitor_sees_one_line_and_no_download_button(tmp_path):
    ctx = _lab(tmp_path, public=True)
    with serve_lab(ctx) as (_demo, url):
        config = httpx.get(f"{url}config", timeout=30).json()
        button = _component(config, "lab-download-replay")
        assert button["props"].get("visible") is False
        notice = _notice(config)
        text = re.sub(r"<[^>]+>", " ", notice)
        assert "The owner of this Space has not configured the replay file" in text
        assert all(word in text for word in ("Results", "Triage", "published runs"))
        assert "button" not in text and "download" not in text.lower() and "--replay" not in text
        assert notice.count("<p>") == 1
        # the event behind the hidden button stays refused to a visitor calling it by hand
        download = [i for i, d in enumerate(config["dependencies"]) if [button["id"], "click"] in d.get("targets", [])]
        messages = private_call(url, download[0], [], button["id"], "visitor-download")
        assert any("does not let visitors" in m.get("log", "") for m in messages if m.get("msg") == "log"), messages
        assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
    ctx.store.close()


def test_the_owner_still_gets_the_download_button_and_how_to_configure(tmp_path):
    ctx = _lab(tmp_path, public=False)
    with serve_lab(ctx) as (_demo, url):
        config = httpx.get(f"{url}config", timeout=30).json()
        assert _component(config, "lab-download-replay")["props"].get("visible") is not False
        assert "LAB_REPLAY=PATH" in _notice(config)
    ctx.store.close()
