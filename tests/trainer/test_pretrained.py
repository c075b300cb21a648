"""The converted base-model directory: ``config.json`` names its model class."""

from __future__ import annotations

import json

from trainer_client.model.pretrained import CONVERTED_MARKER, prepare_base_model


def test_an_earlier_conversion_without_architectures_gets_them(tmp_path):
    out = tmp_path / "base_model"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 7}))
    (out / CONVERTED_MARKER).write_text("{}")
    got = prepare_base_model(None, package=None, gguf_file="m.gguf", tiny=None, out_dir=out)
    assert got == str(out)
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["vocab_size"] == 7  # the rest kept


def test_architectures_already_there_are_left_alone(tmp_path):
    out = tmp_path / "base_model"
    out.mkdir()
    raw = {"model_type": "llama", "architectures": ["MyLlama"]}
    (out / "config.json").write_text(json.dumps(raw))
    (out / CONVERTED_MARKER).write_text("{}")
    prepare_base_model(None, package=None, gguf_file="m.gguf", tiny=None, out_dir=out)
    assert json.loads((out / "config.json").read_text()) == raw
