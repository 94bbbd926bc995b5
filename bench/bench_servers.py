"""Managed model servers: how long the lab's supervisor takes to start, watch and stop them.

Starts `transformers serve` for a model N times through `ManagedServer` and reports the median
seconds to answer /health, to notice a SIGKILLed server (state -> crashed), to restart it and
to stop it (TERM to its process group). Usage:

    python bench/bench_servers.py --model /path/to/hf-model-folder [--repeat 3] [--device cpu]
    python bench/bench_servers.py --tiny        # a 2-layer random model built on the spot (CPU)
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.record import Record  # noqa: E402
from lab.engines.servers import CRASHED, ManagedServer  # noqa: E402
from lab.engines.servers.transformers_serve import transformers_executable, transformers_serve_argv  # noqa: E402


def tiny_model(folder: Path) -> Path:
    """The test suite's tiny random-weight Qwen2 model, saved to `folder`."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tests.conftest import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True)
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def once(model: str, device: str, logs: Path) -> dict[str, float]:
    server = ManagedServer("bench", lambda port: transformers_serve_argv(transformers_executable(), model, port, device=device),
                           logs / "bench.log", env={"HF_HUB_OFFLINE": "1"}, ready_timeout=600)
    t0 = time.perf_counter()
    server.start()
    server.wait_ready()
    ready = time.perf_counter() - t0
    os.kill(server.pid, signal.SIGKILL)
    t1 = time.perf_counter()
    while server.state != CRASHED:
        time.sleep(0.01)
    noticed = time.perf_counter() - t1
    t2 = time.perf_counter()
    server.restart()
    restart = time.perf_counter() - t2
    t3 = time.perf_counter()
    server.stop()
    stop = time.perf_counter() - t3
    return {"ready_s": ready, "crash_noticed_s": noticed, "restart_s": restart, "stop_s": stop}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a local model folder (or Hub id in the local cache)")
    parser.add_argument("--tiny", action="store_true", help="build and use a tiny random model")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not args.model and not args.tiny:
        parser.error("give --model PATH or --tiny")
    record = Record("bench_servers", packages=("transformers", "torch"))
    record.setting(model="tiny random Qwen2" if args.tiny and not args.model else Path(args.model).name,
                   device=args.device, repeat=args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or str(tiny_model(Path(tmp) / "tiny"))
        runs = [once(model, args.device, Path(tmp) / "logs") for _ in range(args.repeat)]
    print(f"transformers serve {model} on {args.device}, {args.repeat} runs (median, seconds):")
    for key in runs[0]:
        print(f"  {key:16s} {statistics.median(r[key] for r in runs):8.3f}")
    labels = {"ready_s": "start to answering /health", "crash_noticed_s": "a SIGKILLed server noticed (state crashed)",
              "restart_s": "restart to answering again", "stop_s": "stop (TERM to its process group) to gone"}
    for key, label in labels.items():
        record.figure(f"managed transformers serve: {label}", statistics.median(r[key] for r in runs), "s",
                      note=f"median of {args.repeat}")
    record.write()


if __name__ == "__main__":
    main()
