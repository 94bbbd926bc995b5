"""`python -m lab data …`: download the public replay file, or summarize a replay source."""
from __future__ import annotations

import argparse
import json

from lab.settings import Settings
from lab.tb2lite import CORRECTED, REPLAY_MODES


def add_arguments(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    """`download` and `info`; returns the sub-parsers so `lab.cli` can add commands from higher layers."""
    sub = parser.add_subparsers(dest="data_command", required=True)
    dl = sub.add_parser("download", help="download the public replay file into the cache (once)")
    dl.add_argument("--url", default=None, help="replay file URL (default: $LAB_REPLAY_URL or the public file)")
    dl.add_argument("--force", action="store_true", help="download again even if cached")
    dl.add_argument("--legacy", action="store_true",
                    help="the legacy 386-step replay file (pinned commit 612f5755), for legacy published runs")
    dl.add_argument("--sha256", default=None, help="the file's sha256: refused unless it matches "
                    "(default: $LAB_REPLAY_SHA256; unset: printed after the download, to pin it)")
    dl.add_argument("--size", default=None, help="the file's size in bytes: refused unless it matches "
                    "(default: $LAB_REPLAY_SIZE)")
    dl.add_argument("--out", default=None, metavar="PATH",
                    help="write the checked file to PATH instead of the cache (a Space image bakes it in this way)")
    dl.add_argument("--quiet", action="store_true", help="no progress bar")
    info = sub.add_parser("info", help="summarize a replay source: tasks, steps, buckets, source groups")
    info.add_argument("--replay", default=None, help="replay source (default: $LAB_REPLAY, else the cached download)")
    info.add_argument("--mode", choices=list(REPLAY_MODES), default=CORRECTED,
                      help="corrected: the 303-step rule (drop invalid/empty refs); all: every turn")
    info.add_argument("--lenient", action="store_true", help="report malformed lines instead of stopping")
    return sub


def run(args: argparse.Namespace) -> int:
    from lab.data import Expected, check_replay_file, download_replay, file_sha256, load_replay

    settings = Settings()
    if args.data_command == "download":
        from lab.settings import LEGACY_REPLAY_URL

        url = args.url or (LEGACY_REPLAY_URL if args.legacy else settings.replay_url)
        expect = Expected.parse(settings.replay_sha256 if args.sha256 is None else args.sha256,
                                settings.replay_size if args.size is None else args.size)
        path = download_replay(url, settings.cache_dir, progress=not args.quiet, force=args.force, expect=expect,
                               check=check_replay_file, out=args.out)
        use = f"LAB_REPLAY={path} or --replay {path}" if args.out else "the lab uses it when no --replay is given"
        print(f"replay file: {path}  ({use})")
        print(f"size {path.stat().st_size} bytes, sha256 {file_sha256(path)}")
        return 0
    replay_set = load_replay(args.replay, mode=args.mode, lenient=args.lenient, settings=settings)
    for problem in replay_set.problems:
        print(f"problem: {problem}")
    print(json.dumps({"path": replay_set.path, **replay_set.manifest()}, indent=1, ensure_ascii=False))
    return 1 if replay_set.problems else 0
