"""A tiny model whose tokenizer adds a BOS token and whose chat template starts with it too (Gemma's
case: the engine then sends `[bos, bos, …]`), built here from tests/conftest.py's tiny parts."""
from __future__ import annotations

from pathlib import Path

from tests.conftest import CHATML_TEMPLATE, build_tiny_tokenizer, save_tiny_model

BOS = "<|endoftext|>"


def build_bos_tokenizer():
    """The tiny tokenizer, adding BOS to every encoding, with a chat template that begins with BOS."""
    from tokenizers.processors import TemplateProcessing

    tokenizer = build_tiny_tokenizer()
    tokenizer.bos_token = BOS
    bos_id = tokenizer.convert_tokens_to_ids(BOS)
    tokenizer._tokenizer.post_processor = TemplateProcessing(single=f"{BOS} $A", pair=f"{BOS} $A $B",
                                                             special_tokens=[(BOS, bos_id)])
    tokenizer.chat_template = "{{ bos_token }}" + CHATML_TEMPLATE
    return tokenizer


def save_bos_model(folder: Path) -> Path:
    """A random-weight tiny model in `folder` with `build_bos_tokenizer()` as its tokenizer."""
    save_tiny_model(folder, hidden=32, heads=4, kv_heads=2, positions=32768)
    build_bos_tokenizer().save_pretrained(folder)
    return folder
