"""Tiny random-weight checkpoints in the layout of each preset's real model (issue 24).

Each is built with the installed transformers' own config and model classes, at tiny sizes that
vLLM's CPU build accepts (attention head size 32 or 64; Qwen3.5's linear-attention heads 64,
bfloat16), and saved with `save_pretrained`, beside a tokenizer trained here on the replay
excerpt's text that carries the family's special tokens and a chat template written in the
family's published format (tests/data/chat_templates/). Nothing is downloaded.

- qwen35: `Qwen3_5ForConditionalGeneration` (text + vision config, as Qwen/Qwen3.5-*), served
  language-model-only; `qwen35_lora`: a peft LoRA adapter on its language model.
- lfm2moe: `Lfm2MoeForCausalLM` (conv and attention layers, dense then MoE blocks).
- gemma4: `Gemma4ForConditionalGeneration` with text, vision and audio configs (the real E4B
  checkpoint carries all three), per-layer inputs, sliding and full attention layers.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lab.engines.loading import MODEL_BUILD_LOCK

from tests.paths import EXCERPT, REPO

TEMPLATES = REPO / "tests" / "data" / "chat_templates"
VOCAB = 2048  # a vocabulary trained on the excerpt: its prompts stay a few thousand tokens long


@dataclass(frozen=True)
class Family:
    """A model family's tokenizer: special tokens (in id order), roles of some of them, template file."""

    specials: tuple[str, ...]
    eos: str
    pad: str
    bos: str | None
    template: str
    add_bos: bool = False  # the tokenizer itself puts `bos` first (Gemma's does)
    plain_added: tuple[str, ...] = ()  # added tokens that are not special (Qwen's <think> tags)


FAMILIES = {
    "qwen35": Family(
        specials=("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|image_pad|>", "<|video_pad|>"),
        eos="<|im_end|>", pad="<|endoftext|>", bos=None, template="qwen3_5.jinja",
        plain_added=("<think>", "</think>"),
    ),
    "lfm2": Family(
        specials=("<|pad|>", "<|startoftext|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"),
        eos="<|im_end|>", pad="<|pad|>", bos="<|startoftext|>", template="lfm2.jinja",
    ),
    "gemma3": Family(  # not a preset's family: the checkpoint a Gemma-4 preset must warn about (issue 41)
        specials=("<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"),
        eos="<end_of_turn>", pad="<pad>", bos="<bos>", template=str(REPO / "scripts" / "templates" / "gemma3_chat.jinja"),
        add_bos=True,
    ),
    "gemma4": Family(
        specials=("<pad>", "<eos>", "<bos>", "<unk>", "<|turn>", "<turn|>", "<|think|>", "<|channel>", "<channel|>",
                  "<|image>", "<image|>", "<|image|>", "<|audio>", "<audio|>", "<|audio|>", "<|video|>"),
        eos="<turn|>", pad="<pad>", bos="<bos>", template="gemma4.jinja", add_bos=True,
    ),
}


def excerpt_texts() -> list[str]:
    """Every message text of the replay excerpt (../shared, read in place), to train the tokenizer on."""
    texts = []
    for line in EXCERPT.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        for message in row.get("messages") or []:
            if isinstance(message.get("content"), str):
                texts.append(message["content"])
        for key in ("prompt", "ref_raw", "reference", "response"):
            if isinstance(row.get(key), str):
                texts.append(row[key])
    return texts


def build_tokenizer(family: str):
    """A byte-level BPE tokenizer (any text encodes) with the family's special tokens and chat template."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    spec = FAMILIES[family]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=list(spec.specials),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator(excerpt_texts(), trainer=trainer)
    core.add_tokens([AddedToken(t, special=False, normalized=False) for t in spec.plain_added])
    if spec.add_bos:
        bos_id = core.token_to_id(spec.bos)
        core.post_processor = processors.TemplateProcessing(single=f"{spec.bos} $A", pair=f"{spec.bos} $A $B",
                                                            special_tokens=[(spec.bos, bos_id)])
    extra = [t for t in spec.specials if t not in (spec.eos, spec.pad, spec.bos)]
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token=spec.eos, pad_token=spec.pad,
                                        bos_token=spec.bos, additional_special_tokens=extra)
    tokenizer.chat_template = (TEMPLATES / spec.template).read_text(encoding="utf-8")  # an absolute path stays itself
    return tokenizer


def under_build_lock(build: Callable[..., Path]) -> Callable[..., Path]:
    """Build a model only while no engine of this process builds one: constructing or loading a model
    switches process-wide state (lab.engines.loading.MODEL_BUILD_LOCK)."""
    @functools.wraps(build)
    def locked(*args, **kwargs) -> Path:
        with MODEL_BUILD_LOCK:
            return build(*args, **kwargs)
    return locked


def _finish(model, tokenizer, folder: Path, dtype) -> Path:
    """Decisive logits, generation config from the tokenizer, weights in `dtype`, saved into `folder`.

    Random weights at the usual 0.02 scale give near-uniform next-token logits, where any rounding
    flips a greedy choice; token embeddings (tied to the output head) drawn with std 1 make the best
    logit stand clear of the second, as a trained model's usually does."""
    import torch

    with torch.no_grad():
        model.get_input_embeddings().weight.normal_(0, 1.0)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    if tokenizer.bos_token_id is not None:
        model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.to(dtype).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@under_build_lock
def save_qwen35(folder: Path, *, seed: int = 0, positions: int = 8192) -> Path:
    """`Qwen3_5ForConditionalGeneration`: 2 text layers (Gated DeltaNet, then full attention with head
    size 64 and an interleaved M-RoPE over a quarter of it), a 1-block vision tower; bfloat16 weights
    (vLLM's CPU Gated DeltaNet asserts BF16)."""
    import torch
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

    tokenizer = build_tokenizer("qwen35")
    ids = tokenizer.convert_tokens_to_ids
    text = dict(
        vocab_size=len(tokenizer), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        layer_types=["linear_attention", "full_attention"], num_attention_heads=2, num_key_value_heads=1,
        head_dim=64, linear_key_head_dim=64, linear_value_head_dim=64, linear_num_key_heads=1,
        linear_num_value_heads=2, linear_conv_kernel_dim=4, max_position_embeddings=positions,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000_000.0, "partial_rotary_factor": 0.25,
                         "mrope_section": [3, 3, 2], "mrope_interleaved": True},
        tie_word_embeddings=True, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    vision = dict(depth=1, hidden_size=64, intermediate_size=128, num_heads=2, out_hidden_size=128, patch_size=16,
                  spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=64)
    config = Qwen3_5Config(text_config=text, vision_config=vision, image_token_id=ids("<|image_pad|>"),
                           video_token_id=ids("<|video_pad|>"), vision_start_token_id=ids("<|vision_start|>"),
                           vision_end_token_id=ids("<|vision_end|>"), tie_word_embeddings=True)
    torch.manual_seed(seed)
    model = Qwen3_5ForConditionalGeneration(config)
    return _finish(model, tokenizer, folder, torch.bfloat16)


@under_build_lock
def save_qwen35_lora(base: Path, folder: Path, *, seed: int = 1) -> Path:
    """A peft LoRA adapter (rank 8) on the language model's attention and MLP projections of the multimodal
    checkpoint `base` (keys `model.language_model.layers.N…`, the layout vLLM maps for this architecture:
    an adapter made on `Qwen3_5ForCausalLM`, keys `model.layers.N…`, is loaded by vLLM 0.32 without error
    and changes nothing)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3_5ForConditionalGeneration

    model = Qwen3_5ForConditionalGeneration.from_pretrained(base, dtype=torch.float32)
    targets = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"
    peft_model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=targets))
    torch.manual_seed(seed)
    with torch.no_grad():  # a non-zero B: the adapter changes the answers
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.2)
    peft_model.save_pretrained(folder)
    return folder


@under_build_lock
def save_lfm2moe(folder: Path, *, seed: int = 0, positions: int = 8192) -> Path:
    """`Lfm2MoeForCausalLM`: 4 layers (short convolutions and attention with head size 32), the first
    dense, the others mixtures of 4 experts with 2 active per token; float32."""
    import torch
    from transformers import Lfm2MoeConfig, Lfm2MoeForCausalLM

    tokenizer = build_tokenizer("lfm2")
    config = Lfm2MoeConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, moe_intermediate_size=64,
        num_hidden_layers=4, layer_types=["conv", "full_attention", "conv", "full_attention"],
        num_attention_heads=2, num_key_value_heads=1, num_dense_layers=1, num_experts=4, num_experts_per_tok=2,
        max_position_embeddings=positions, tie_word_embeddings=True, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    return _finish(Lfm2MoeForCausalLM(config), tokenizer, folder, torch.float32)


@under_build_lock
def save_gemma4(folder: Path, *, seed: int = 0, positions: int = 8192) -> Path:
    """`Gemma4ForConditionalGeneration` with text, vision and audio configs: 4 text layers (3 sliding-window,
    1 full attention, head size 32), per-layer inputs as the E-sized models have, 1-layer towers; float32."""
    import torch
    from transformers import Gemma4Config, Gemma4ForConditionalGeneration

    tokenizer = build_tokenizer("gemma4")
    ids = tokenizer.convert_tokens_to_ids
    text = dict(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=4,
        layer_types=["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
        num_attention_heads=2, num_key_value_heads=1, head_dim=32, per_layer_config={}, sliding_window=128,
        vocab_size_per_layer_input=len(tokenizer), hidden_size_per_layer_input=16, max_position_embeddings=positions,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id,
    )
    vision = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
                  num_key_value_heads=2, head_dim=32, position_embedding_size=256)
    audio = dict(hidden_size=64, num_hidden_layers=1, num_attention_heads=2, subsampling_conv_channels=[8, 4],
                 output_proj_dims=64)
    config = Gemma4Config(text_config=text, vision_config=vision, audio_config=audio,
                          boi_token_id=ids("<|image>"), eoi_token_id=ids("<image|>"), image_token_id=ids("<|image|>"),
                          boa_token_id=ids("<|audio>"), eoa_token_index=ids("<audio|>"), audio_token_id=ids("<|audio|>"),
                          video_token_id=ids("<|video|>"), tie_word_embeddings=True)
    torch.manual_seed(seed)
    return _finish(Gemma4ForConditionalGeneration(config), tokenizer, folder, torch.float32)


@under_build_lock
def save_gemma3(folder: Path, *, seed: int = 0, positions: int = 8192) -> Path:
    """`Gemma3ForCausalLM` (model type `gemma3_text`, as Gemma 3 270M): 2 layers, one sliding-window and one
    full attention, head size 32; float32. The Gemma-4 preset is not made for it."""
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    tokenizer = build_tokenizer("gemma3")
    config = Gemma3TextConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"], num_attention_heads=2, num_key_value_heads=1,
        head_dim=32, sliding_window=128, max_position_embeddings=positions, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id,
    )
    torch.manual_seed(seed)
    return _finish(Gemma3ForCausalLM(config), tokenizer, folder, torch.float32)


def vllm_test_env(exe: str, root: Path) -> dict[str, str]:
    """The environment a vLLM test runs the lab in (as tests/engines/test_vllm_cpu.py's): LAB_VLLM, the CPU
    backend, offline, the lab's logs and cache in `root` (vLLM's caches: the ones vllm_exe sets)."""
    return {
        "LAB_VLLM": exe, "LAB_VLLM_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
        "LAB_LOG_DIR": str(root / "logs"), "LAB_CACHE_DIR": str(root / "cache"),
    }
