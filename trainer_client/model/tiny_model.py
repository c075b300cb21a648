"""A tiny causal LM and a character-level tokenizer, built locally (no hub).

    path = build_tiny_model(TinyModelSettings(), "runs/tiny/base_model")
    model = AutoModelForCausalLM.from_pretrained(path)   # a real Qwen2 (or Llama) model

The saved directory is an ordinary Hugging Face model directory (config, safetensors,
``tokenizer.json``), so HF ``generate``, vLLM and ``grpo-eval`` load it like any other.
"""

from __future__ import annotations

import string
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from trainer_client.settings import TinyModelSettings

__all__ = ["SPECIAL_TOKENS", "TinyModelSettings", "build_char_tokenizer", "build_tiny_model"]

#: pad, beginning and end of sequence, unknown character
SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")
_CHARS = string.digits + string.ascii_letters + string.punctuation + " \n"


def build_char_tokenizer() -> PreTrainedTokenizerFast:
    """One token per printable ASCII character, plus :data:`SPECIAL_TOKENS`."""
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in _CHARS:
        vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>",
                                   eos_token="<eos>", unk_token="<unk>", padding_side="left")


def build_tiny_model(settings: TinyModelSettings, out_dir: str | Path) -> Path:
    """Build a randomly initialised model + tokenizer and save both to ``out_dir``."""
    tok = build_char_tokenizer()
    common = dict(
        vocab_size=len(tok), hidden_size=settings.hidden_size,
        num_hidden_layers=settings.num_layers, num_attention_heads=settings.num_heads,
        num_key_value_heads=settings.num_kv_heads,
        intermediate_size=settings.intermediate_size,
        max_position_embeddings=settings.max_position_embeddings,
        pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, tie_word_embeddings=True,
    )
    torch.manual_seed(settings.seed)
    model: PreTrainedModel
    if settings.arch == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**common))
    else:
        model = LlamaForCausalLM(LlamaConfig(**common))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out
