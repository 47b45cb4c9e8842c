"""The source fact sheet names an attribute the caller must set before forward (None after the build, read by
forward, never set there), read from the source's own code by AST; blind live run 9's player found it by reading."""

from __future__ import annotations

import json

from msmigrate.tools.repo_reader.hf_summary import hf_summary

MODELING = '''
import torch

class Base(torch.nn.Module):
    pass

class ChatModel(Base):
    def __init__(self, config):
        super().__init__()
        self.marker_token_index = None
        self.cache = None
        self.scale = 2.0

    def prepare(self, tokenizer):
        self.marker_token_index = tokenizer.convert_tokens_to_ids("<m>")

    def forward(self, input_ids, labels=None, **kwargs):
        self.cache = input_ids
        hit = input_ids == self.marker_token_index
        return hit.float().sum() * self.scale
'''


def test_an_attribute_none_after_init_and_read_by_forward_is_named(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["ChatModel"], "auto_map": {
        "AutoModel": "modeling_chat.ChatModel"}}), encoding="utf-8")
    (tmp_path / "modeling_chat.py").write_text(MODELING, encoding="utf-8")
    forward = hf_summary(tmp_path).data["forward"]
    # cache is None in __init__ but forward assigns it; scale is not None: neither is the caller's to set
    assert forward["caller_must_set"] == [{"attribute": "marker_token_index", "none_in_init_line": 10,
                                           "read_in_forward_line": 19, "set_only_by": ["prepare"]}]
    (tmp_path / "modeling_chat.py").write_text(MODELING.replace("== self.marker_token_index", "== 3"),
                                               encoding="utf-8")
    assert "caller_must_set" not in hf_summary(tmp_path).data["forward"]
