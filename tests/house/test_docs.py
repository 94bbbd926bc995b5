"""The documentation: the site builds with strict checking (broken links, missing pages or anchors, any
warning fail it), every picture a page shows is one scripts/screenshots.py makes (read from its declared
list, no browser needed), the README stays a front door, and the benchmarks' figures are data."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.paths import REPO

DOCS = REPO / "docs"
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def declared(name: str) -> object:
    """A module-level constant of scripts/screenshots.py, read with ast (nothing imported or run)."""
    tree = ast.parse((REPO / "scripts" / "screenshots.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"scripts/screenshots.py declares no {name}")


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


def pictures() -> dict[Path, list[Path]]:
    """page -> the local pictures it shows (resolved against the page)."""
    found = {}
    for page in pages():
        refs = [m for m in IMAGE.findall(page.read_text(encoding="utf-8")) if "://" not in m]
        found[page] = [(page.parent / ref).resolve() for ref in refs]
    return found


def test_the_site_builds_strictly(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert "WARNING" not in done.stderr, done.stderr[-3000:]
    built = tmp_path / "site"
    for page in ("reference/cli/index.html", "reference/spec-options/index.html", "architecture/index.html",
                 "benchmarks/index.html"):
        assert (built / page).is_file(), page
    cli = (built / "reference/cli/index.html").read_text(encoding="utf-8")
    from lab.cli import COMMANDS

    for command in COMMANDS:  # the generated reference names every command
        assert f"python -m lab {command}" in cli, command
    assert "generated:" not in (built / "reference/spec-options/index.html").read_text(encoding="utf-8")


def test_every_page_is_in_the_nav():
    config = yaml.load((REPO / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)

    def walk(items) -> list[str]:
        out = []
        for item in items:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            out += walk(value) if isinstance(value, list) else [value]
        return out

    assert sorted(walk(config["nav"])) == sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))


def test_every_picture_shown_is_one_the_script_makes():
    shots, limit = declared("SHOTS"), declared("MAX_BYTES")
    images = (DOCS / "images").resolve()
    shown = set()
    for page, refs in pictures().items():
        for ref in refs:
            where = f"{page.relative_to(REPO)} shows {ref}"
            assert ref.parent == images, f"{where}: pictures live in docs/images/"
            assert ref.name in shots, f"{where}, which scripts/screenshots.py does not make (SHOTS)"
            assert ref.is_file(), f"{where}: missing; run python scripts/screenshots.py"
            assert ref.stat().st_size <= limit, f"{where}: {ref.stat().st_size:,} bytes (limit {limit:,})"
            shown.add(ref.name)
    assert shown == set(shots), f"made but shown nowhere: {sorted(set(shots) - shown)}"
    assert {p.name for p in images.glob("*.png")} == set(shots), "a picture in docs/images/ the script does not make"


def test_each_tab_page_shows_its_picture():
    for tab in ("compare", "engines", "batch", "results", "triage"):
        refs = pictures()[DOCS / "tabs" / f"{tab}.md"]
        assert any(r.name == f"{tab}.png" for r in refs), tab


def test_the_readme_is_a_front_door():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 150, len(lines)
    front = yaml.safe_load(text.split("---")[1])  # the Space's card
    assert front["sdk"] == "docker" and front["app_port"] == 7860
    assert "pip install -r requirements.txt && python app.py" in text and "bash scripts/test.sh" in text
    assert not DATE.search(text), DATE.search(text)
    assert not re.search(r"\b\d+(\.\d+)? ?(ms|min)\b|\bload average\b", text), "timings belong to bench/results/"
    assert "docs/images/compare.png" in text
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (REPO / link).is_file(), link


def test_the_ci_runs_the_readme_test_command():
    assert "bash scripts/test.sh" in (REPO / ".ci" / "run").read_text(encoding="utf-8")


def test_no_page_is_dated():
    for page in DOCS.rglob("*.md"):
        assert not DATE.search(page.read_text(encoding="utf-8")), page


def test_benchmark_figures_are_data():
    """Every bench/bench_*.py records through bench/record.py; every stored file says where it ran."""
    names = {p.stem for p in (REPO / "bench").glob("bench_*.py")}
    for name in names:
        source = (REPO / "bench" / f"{name}.py").read_text(encoding="utf-8")
        assert f'Record("{name}"' in source and ".write()" in source, f"bench/{name}.py does not write its figures"
    for path in sorted((REPO / "bench" / "results").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        assert data["benchmark"] == path.stem and path.stem in names, path
        assert data["figures"] and all({"label", "value", "unit"} <= set(f) for f in data["figures"]), path
        box = data["machine"]
        assert box["cores"] >= 1 and box["python"] and box["packages"], path
        assert len(box["load_average_before"]) == 3 and len(box["load_average_after"]) == 3, path
        assert data["command"].startswith(f"python bench/{path.stem}.py"), path


CACHE_PATH = re.compile(r"(?:~/\.cache|\$XDG_CACHE_HOME)/([\w.-]+)")


def test_the_cache_folder_the_docs_name_is_the_codes(tmp_path, monkeypatch):
    """Every `~/.cache/NAME` (or `$XDG_CACHE_HOME/NAME`) a page names is lab/settings.py's default cache folder;
    an earlier folder's name appears only in a paragraph that says the lab moves it into that one."""
    from lab.settings import CACHE_NAME, OLD_CACHE_NAMES, Settings

    for name in ("LAB_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert Settings().cache_dir == tmp_path / ".cache" / CACHE_NAME  # the default the pages must name
    named = []
    for page in pages():
        for paragraph in page.read_text(encoding="utf-8").split("\n\n"):
            for found in CACHE_PATH.findall(paragraph):
                moved = found in OLD_CACHE_NAMES and f"~/.cache/{CACHE_NAME}" in paragraph
                named.append(found)
                assert found == CACHE_NAME or moved, f"{page.relative_to(REPO)} names ~/.cache/{found}"
    assert CACHE_NAME in named  # the pages say where it is
    text = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    assert f"`$LAB_CACHE_DIR`, default `~/.cache/{CACHE_NAME}`" in text  # "Where things are kept"
