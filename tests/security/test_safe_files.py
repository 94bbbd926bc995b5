"""Files in the lab's folders are never opened through a link (lab.security.safe_files): a link or a special
file of the name is refused in one line, a dangling link is never created at its target, a name is free only
when no entry has it, and an atomic write replaces the entry (never the file a link points to)."""
from __future__ import annotations

import os
import threading

import pytest

from lab.security import safe_files
from lab.security.safe_files import LinkRefused


@pytest.fixture
def outside(tmp_path):
    """A file outside the lab's folder, holding something a link must never touch."""
    target = tmp_path / "elsewhere" / "precious.txt"
    target.parent.mkdir()
    target.write_text("precious\nsecond line\n")
    return target


@pytest.fixture
def folder(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    return runs


@pytest.mark.parametrize("mode", ["r", "w", "a", "rb", "wb", "ab"])
def test_no_mode_opens_a_link(folder, outside, mode):
    (folder / "x").symlink_to(outside)
    with pytest.raises(LinkRefused, match=r"x: is a symbolic link.*remove the link"):
        safe_files.open_file(folder / "x", mode)
    assert outside.read_text() == "precious\nsecond line\n"


def test_a_dangling_link_is_never_created_at_its_target(folder, tmp_path):
    target = tmp_path / "elsewhere-new.txt"
    (folder / "x").symlink_to(target)
    for call in (lambda: safe_files.open_file(folder / "x", "w"), lambda: safe_files.touch(folder / "x"),
                 lambda: safe_files.open_fd(folder / "x", os.O_RDWR | os.O_CREAT)):
        with pytest.raises(LinkRefused):
            call()
    assert not target.exists()
    assert safe_files.entry_exists(folder / "x") and not (folder / "x").exists()  # taken, though dangling


def test_a_fifo_or_a_folder_is_refused_without_blocking(folder):
    os.mkfifo(folder / "fifo")
    (folder / "dir").mkdir()
    done = threading.Event()

    def try_all() -> None:
        for name in ("fifo", "dir"):
            for mode in ("r", "w", "a"):
                with pytest.raises(LinkRefused, match="not a regular file"):
                    safe_files.open_file(folder / name, mode)
        done.set()

    thread = threading.Thread(target=try_all, daemon=True)
    thread.start()
    thread.join(10)
    assert done.is_set(), "opening a FIFO blocked"


def test_link_problem_says_why_and_passes_regular_files(folder, outside):
    (folder / "plain").write_text("x")
    (folder / "link").symlink_to(outside)
    assert safe_files.link_problem(folder / "plain") is None
    assert safe_files.link_problem(folder / "absent") is None
    assert "symbolic link" in safe_files.link_problem(folder / "link")


def test_an_atomic_write_replaces_the_link_never_its_target(folder, outside):
    (folder / "run.json").symlink_to(outside)
    safe_files.write_bytes_atomic(folder / "run.json", b"new")
    assert not (folder / "run.json").is_symlink() and (folder / "run.json").read_bytes() == b"new"
    assert outside.read_text() == "precious\nsecond line\n"
    assert sorted(p.name for p in folder.iterdir()) == ["run.json"]  # no temporary file left


def test_an_atomic_write_without_replace_refuses_any_entry_naming_the_file(folder, tmp_path):
    (folder / "run.json").symlink_to(tmp_path / "nowhere.json")  # dangling
    with pytest.raises(FileExistsError) as caught:
        safe_files.write_bytes_atomic(folder / "run.json", b"new", replace=False)
    assert caught.value.filename == str(folder / "run.json")  # the name asked for, never a temporary name
    assert not (tmp_path / "nowhere.json").exists()
    assert sorted(p.name for p in folder.iterdir()) == ["run.json"]


def test_a_failed_write_leaves_nothing(folder):
    def fail(fh) -> None:
        fh.write("half")
        raise ValueError("boom")

    with pytest.raises(ValueError):
        safe_files.write_atomic(folder / "run.json", fail)
    assert list(folder.iterdir()) == []


def test_odd_names_stay_in_the_folder(folder):
    """Names with spaces, newlines, quotes and non-ASCII letters are files of the folder like any other."""
    for name in ("a b", "new\nline", "quote'\"", "ünï-名", "-leading-dash", ".hidden"):
        safe_files.write_bytes_atomic(folder / name, b"x")
        with safe_files.open_file(folder / name, "rb") as fh:
            assert fh.read() == b"x"
    assert len(list(folder.iterdir())) == 6


def test_a_hard_link_is_read_but_never_written(folder, outside):
    if os.stat(folder).st_dev != os.stat(outside).st_dev:
        pytest.skip("a hard link needs one file system")
    os.link(outside, folder / "x")
    assert safe_files.read_bytes(folder / "x") == outside.read_bytes()
    for mode in ("w", "a"):
        with pytest.raises(LinkRefused, match="is a hard link"):
            safe_files.open_file(folder / "x", mode)
    assert outside.read_text() == "precious\nsecond line\n"
