"""Serve the TB2-lite comparison lab: settings → build the UI → launch.

    python app.py [--port N] [--replay PATH] [--results DIR] [--engine SPEC …] [--ray ADDRESS] [--mcp]

Defaults to 127.0.0.1:7860; PORT and GRADIO_SERVER_NAME are honoured (Hugging Face Spaces).
"""
from __future__ import annotations

import argparse
import os
import sys


def port_number(text: str) -> int:
    """argparse type of --port (and of $PORT, its default): a TCP port, 1-65535."""
    if not text.strip().isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"'{text[:40]}' (from --port or $PORT) is not a port: give a number 1-65535")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    """`python app.py`'s arguments (docs/reference/cli.md is generated from this parser)."""
    parser = argparse.ArgumentParser(prog="python app.py", description="TB2-lite comparison lab (web UI)")
    parser.add_argument("--port", type=port_number, default=os.environ.get("PORT") or "7860",
                        help="port (default 7860 or $PORT)")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME") or "127.0.0.1",
                        help="address to bind (default 127.0.0.1 or $GRADIO_SERVER_NAME)")
    parser.add_argument("--replay", help="replay .jsonl (default: $LAB_REPLAY, else the cached download)")
    parser.add_argument("--results", help="results folder (leaderboard CSVs, result JSON files)")
    parser.add_argument("--engine", action="append", default=[], metavar="SPEC",
                        help="engine to load at start (repeatable): reference, stored:PATH, transformers:…, vllm:…, "
                             "transformers-serve:…, openai:…")
    parser.add_argument("--mcp", action="store_true",
                        help="also serve the lab's judgements as MCP tools (Gradio's MCP server, at "
                             "/gradio_api/mcp/): list runs, compare two, a series' table, a Triage slice, one step")
    parser.add_argument("--ray", metavar="ADDRESS", help="Ray cluster the Batch tab submits sweeps to "
                        "(HEAD:6379, ray://HEAD:10001; default: $LAB_RAY_ADDRESS)")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def mcp_problem() -> None:
    """--mcp without Gradio's MCP extra: one line saying what to install, before anything starts."""
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        raise SystemExit("error: --mcp needs Gradio's MCP extra: pip install \"gradio[mcp]==6.31.0\"")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.mcp:
        mcp_problem()
    from lab.engines.servers import install_exit_handlers
    from lab.errors import os_error_line
    from lab.settings import Settings

    install_exit_handlers()  # Ctrl-C, SIGTERM or exit: no model server outlives the lab
    from lab.sweep.leftovers import remove_orphans

    remove_orphans()  # folders of sweep actors killed outright on this machine (their driver killed)
    from lab.serve import create_context, exposure_problem, launch_problem, opening_message, startup_report
    from lab.ui.app import build_app, launch_options
    from lab.ui.shell.public import queue_app, queue_options

    overrides = {}
    if args.results:
        overrides["results_dir"] = args.results
    if args.replay:
        overrides["replay_path"] = args.replay
    if args.ray:
        overrides["ray_address"] = args.ray
    try:
        settings = Settings(**overrides)
        problem = exposure_problem(args.host, settings)  # the owner's lab is not served to the network by default
        if problem:
            raise SystemExit(f"error: {problem}")
        print(opening_message(settings), file=sys.stderr, flush=True)
        ctx = create_context(settings, args.engine)
    except OSError as exc:  # a results folder that is a file, or cannot be made or written
        raise SystemExit(f"error: cannot open the lab's folders: {os_error_line(exc)} (--results DIR: a folder the "
                         "lab can write)") from None
    for line in startup_report(ctx):
        print(line, file=sys.stderr)
    demo = build_app(ctx, mcp=args.mcp)
    queue_app(demo, queue_options(settings))
    try:
        demo.launch(server_name=args.host, server_port=args.port, mcp_server=args.mcp, **launch_options())
    except OSError as exc:  # the port is taken, the host is not this machine's
        raise SystemExit(f"error: cannot serve on {args.host}:{args.port}: {launch_problem(args.host, args.port, exc)} "
                         "(--port N, --host ADDRESS)") from None
    return 0


if __name__ == "__main__":
    try:
        status = main()
    except SystemExit as stop:  # SIGTERM (exit handlers) or an argument error
        status = stop.code
    from lab.engines.servers import exit_promptly

    exit_promptly(status)  # no slow interpreter teardown: a Space stops within 10 s of SIGTERM
