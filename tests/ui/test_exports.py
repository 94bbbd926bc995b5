"""Exports download from the lab's own route (lab.ui.shell.exports): a random token and the file's name, never a
path on the server; an attachment the browser does not render; 404 in one line once swept or for anything the
token does not name (issue 55 item 6: what-if and Triage exports handed the visitor Gradio's absolute cache
path)."""
from __future__ import annotations

import re
import time

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from lab.ui.shell import exports
from lab.ui.shell.exports import ExportArea, download_html, export_routes


@pytest.fixture()
def area(monkeypatch):
    fresh = ExportArea(max_age=0.6, prefix="lab-exports-test-")
    monkeypatch.setattr(exports, "EXPORTS", fresh)
    yield fresh
    fresh.remove()


@pytest.fixture()
def client():
    with TestClient(Starlette(routes=export_routes())) as c:
        yield c


def _export(area: ExportArea, name: str, text: str):
    path = area.new_dir() / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_link_names_a_token_and_the_file_only(area, client):
    path = _export(area, "triage-slice.csv", "step_key,tags\n<script>alert(1)</script>,x\n")
    html = download_html(path, "2 rows")
    href = re.search(r'href="([^"]+)"', html).group(1)
    assert re.fullmatch(r"/lab-exports/[A-Za-z0-9_-]{32}/triage-slice\.csv", href), href
    assert str(path.parent) not in html and str(area.root) not in html and "/tmp" not in html
    got = client.get(href)
    assert got.status_code == 200 and got.text.startswith("step_key,tags")
    assert got.headers["content-disposition"].startswith("attachment;") and "triage-slice.csv" in got.headers["content-disposition"]
    assert got.headers["x-content-type-options"] == "nosniff"
    assert got.headers["content-type"] == "application/octet-stream"  # never rendered as HTML on the lab's origin
    assert client.head(href).status_code == 200
    assert client.post(href).status_code == 405


def test_anything_the_token_does_not_name_is_404_in_one_line(area, client):
    path = _export(area, "whatifs.jsonl", "{}\n")
    href = area.link(path)
    token = href.split("/")[2]
    for bad in (f"/lab-exports/{token}/other.jsonl", f"/lab-exports/{'A' * 32}/whatifs.jsonl",
                f"/lab-exports/{token}/..%2F..%2Fetc%2Fpasswd", "/lab-exports/../../etc/passwd",
                f"/lab-exports/{token}/whatifs.jsonl/extra", f"/lab-exports/{token}/%00"):
        got = client.get(bad)
        assert got.status_code == 404, bad
        assert "root:" not in got.text and got.text.count("\n") <= 1
    assert client.get(href).status_code == 200


def test_a_swept_export_is_gone_and_its_token_forgotten(area, client):
    links = [area.link(_export(area, "whatifs.jsonl", "{}\n")) for _ in range(50)]
    assert client.get(links[0]).status_code == 200
    time.sleep(area.max_age + 0.2)
    area.sweep()
    got = client.get(links[0])
    assert got.status_code == 404 and "export it again" in got.text
    assert area._links == {}  # the tokens of swept exports are not kept


def test_launch_options_add_the_route_beside_the_upload_limits(monkeypatch):
    from lab.ui.app import launch_options

    monkeypatch.setenv("LAB_PUBLIC", "1")
    options = launch_options()
    routes = options["app_kwargs"]["routes"]
    assert [r.path for r in routes] == ["/lab-exports/{token}/{name}"]
    assert options["app_kwargs"]["middleware"]  # a public deployment still refuses uploads
