"""Data branch B on the Megatron route (agent/routes/megatron/plan.py:data_branch): the example data JSON's template
keeps its mm_plugin only when that plugin expands the token the source's processor makes of an image."""

from __future__ import annotations

import json

from msmigrate.agent.routes.megatron.plan import MEGATRON_DATA_FILES, data_branch, template_media_token
from msmigrate.tools.media_expansion import MediaExpansion

TEMPLATES = '''
_register_template(
    name="qwen2vl",
    params=RegisterParams(format_user=StringFormatter(slots=["<|im_start|>user\\n{{content}}"])),
    mm_plugin=get_mm_plugin(name="qwen2_vl", image_token="<|image_pad|>", video_token="<|video_pad|>"),
)
_register_template(name="plain", params=RegisterParams(format_user=StringFormatter(slots=["{{content}}"])))
'''


def _target(tmp_path):
    path = tmp_path / MEGATRON_DATA_FILES[0]
    path.parent.mkdir(parents=True)
    path.write_text(TEMPLATES)
    (tmp_path / "data.json").write_text(json.dumps({"dataset_param": {"basic_parameters": {"template": "qwen2vl"}}}))
    return tmp_path


def test_template_media_token_is_read_from_the_registering_call(tmp_path):
    target = _target(tmp_path)
    assert template_media_token(target, "qwen2vl") == "<|image_pad|>"
    assert template_media_token(target, "plain") is None  # no mm_plugin: nothing to compare
    assert template_media_token(target, "absent") is None


def test_another_media_token_means_a_new_template_and_plugin(tmp_path):
    target = _target(tmp_path)
    b = data_branch(target, "data.json", MediaExpansion(ok=True, media_token="<image>"), "tinyllava")
    assert b["template"] == "tinyllava" and "'<|image_pad|>'" in b["why"] and "'<image>'" in b["why"]
    assert data_branch(target, "data.json", MediaExpansion(ok=True, media_token="<|image_pad|>"), "x") is None
    # an expansion not measured decides nothing (the example is kept, G2 compares)
    assert data_branch(target, "data.json", MediaExpansion(ok=False, error="no processor"), "x") is None
