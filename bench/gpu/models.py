"""The GPU proof's models (../shared/gpu/README.md), made on this machine and carried to the GPU one.

    python bench/gpu/models.py --out .gpu/models [--replay FILE]

Writes three model folders sized like the Qwen3 family (`Qwen3ForCausalLM`, bfloat16, 151,936-token
vocabulary, 40,960 positions): `qwen3-0.6b`, `qwen3-1.7b` and `qwen3-8b`, each with `config.json` and
a byte-level BPE tokenizer trained on the replay's own text (ChatML template). They carry no weights:
bench/gpu/proof.py serves them with vLLM's `--load-format dummy`, random weights made on the GPU, which
cost the same compute as trained ones. Beside them `lora-0.6b`, a random LoRA adapter (peft, rank 8, the
attention projections) on the smallest, with real weights, as vLLM loads adapters from files.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.conftest import CHATML_TEMPLATE  # noqa: E402
from tests.paths import EXCERPT  # noqa: E402

# name -> Qwen3 dimensions of the model of that size on the Hub (hidden, intermediate, layers, heads, KV heads, tied)
SIZES = {
    "qwen3-0.6b": (1024, 3072, 28, 16, 8, True),
    "qwen3-1.7b": (2048, 6144, 28, 16, 8, True),
    "qwen3-8b": (4096, 12288, 36, 32, 8, False),
}
TINY = (64, 128, 2, 2, 1, True)  # --tiny: every size this small (head size 32), for a dry run on vLLM's CPU build
VOCAB, POSITIONS, HEAD_DIM = 151936, 40960, 128
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]


def replay_text(path: Path) -> list[str]:
    """Every message of every step of a replay file, as the tokenizer's training text."""
    texts = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        texts += [m.get("content") or "" for m in record.get("messages", [])]
        texts += [str(record.get(k) or "") for k in ("prompt", "ref_raw")]
    return [t for t in texts if t]


def build_tokenizer(texts: list[str], vocab: int):
    """A byte-level BPE (any text encodes) trained on `texts`, with ChatML specials and template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|pad|>",
                                        unk_token="<|endoftext|>", additional_special_tokens=["<|im_start|>", "<|endoftext|>"])
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def qwen3_config(name: str, tokenizer, tiny: bool = False):
    from transformers import Qwen3Config

    hidden, inter, layers, heads, kv, tied = TINY if tiny else SIZES[name]
    return Qwen3Config(vocab_size=VOCAB, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                       num_attention_heads=heads, num_key_value_heads=kv, head_dim=32 if tiny else HEAD_DIM,
                       max_position_embeddings=POSITIONS, rope_theta=1_000_000.0, tie_word_embeddings=tied,
                       bos_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
                       eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                       dtype="bfloat16", architectures=["Qwen3ForCausalLM"])


def parameters(name: str) -> float:
    """Parameter count (billions) of a size, from its dimensions."""
    hidden, inter, layers, heads, kv, tied = SIZES[name]
    attention = hidden * HEAD_DIM * (heads * 2 + kv * 2) + 2 * HEAD_DIM
    per_layer = attention + 3 * hidden * inter + 2 * hidden
    return (VOCAB * hidden * (1 if tied else 2) + layers * per_layer + hidden) / 1e9


def save_adapter(config, folder: Path) -> None:
    """A random LoRA adapter in bfloat16 (both matrices random, so it changes the answers) on `config`'s model."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3ForCausalLM

    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                      init_lora_weights=False, task_type="CAUSAL_LM")
    get_peft_model(model, lora).to(torch.bfloat16).save_pretrained(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--replay", default=str(EXCERPT), type=Path, help="the text the tokenizer learns from")
    parser.add_argument("--vocab", type=int, default=2000, help="tokenizer vocabulary: 2,000 gives 3.4 characters a token on the replay, about what a real Qwen tokenizer gives")
    parser.add_argument("--tiny", action="store_true", help="tiny dimensions (a dry run of bench/gpu/proof.py on CPU)")
    args = parser.parse_args()
    tokenizer = build_tokenizer(replay_text(args.replay), args.vocab)
    for name in SIZES:
        folder = args.out / name
        qwen3_config(name, tokenizer, args.tiny).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        size = "tiny" if args.tiny else f"{parameters(name):.2f}B parameters"
        print(f"{folder}: {size}, tokenizer of {len(tokenizer)} tokens")
    save_adapter(qwen3_config("qwen3-0.6b", tokenizer, args.tiny), args.out / "lora-0.6b")
    print(f"{args.out / 'lora-0.6b'}: LoRA rank 8 on qwen3-0.6b")


if __name__ == "__main__":
    main()
