"""A processor class the folder names and defines but no auto_map reaches (DeepSeek-VL2-style; found on a held-out
crop-tiling VLM): the plan's branch-C reason points at that code instead of saying the folder declares nothing."""

from __future__ import annotations

import json
from types import SimpleNamespace

from msmigrate.tools.repo_reader.processor_code import declared_processor_code, describe_unreached

CODE = '''"""doc"""


class TilerProcessor:
    def __init__(self, tokenizer, sizes):
        self.tokenizer = tokenizer

    def crops(self, image):
        return []

    def __call__(self, prompt, images):
        return {}
'''


def folder(tmp_path, auto_map=None):
    (tmp_path / "processing_tiler.py").write_text(CODE)
    cfg = {"processor_class": "TilerProcessor", "image_token": "<image>"}
    if auto_map:
        cfg["auto_map"] = auto_map
    (tmp_path / "processor_config.json").write_text(json.dumps(cfg))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "tiler", "auto_map": {
        "AutoModelForCausalLM": "modeling_tiler.TilerForCausalLM"}}))
    return tmp_path


def test_the_defining_file_and_reachability_are_read(tmp_path):
    code = declared_processor_code(folder(tmp_path))
    assert code == {"class": "TilerProcessor", "declared_in": "processor_config.json",
                    "defined_in": "processing_tiler.py", "line": 4, "methods": ["__init__", "crops", "__call__"],
                    "auto_map_reaches": False}
    said = describe_unreached(code)
    assert "TilerProcessor (processing_tiler.py:4, named by processor_config.json" in said
    assert "AutoProcessor cannot load it" in said


def test_reached_or_absent_code_says_nothing(tmp_path):
    reached = declared_processor_code(folder(tmp_path, {"AutoProcessor": "processing_tiler.TilerProcessor"}))
    assert reached["auto_map_reaches"] and describe_unreached(reached) is None
    (tmp_path / "processing_tiler.py").unlink()
    gone = declared_processor_code(tmp_path)
    assert gone["defined_in"] is None and describe_unreached(gone) is None


def test_no_declared_processor(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert declared_processor_code(tmp_path) is None


def test_branch_c_reason_points_at_the_code(tmp_path):
    from msmigrate.agent.nodes.plan import processor_branch
    from msmigrate.tools.runtime_processor import RuntimeProcessor

    bare = RuntimeProcessor(ok=True, loaded=True, processor_class="TokenizersBackend", kind="tokenizer",
                            handles_images=False)
    plan = {"template": "tiler", "collator": "qwen3vl", "reasons": []}
    out = processor_branch(folder(tmp_path), "tiler", bare, plan)
    assert out["data_branch"] == "C"
    assert "builds the processor itself, as the folder's own TilerProcessor (processing_tiler.py:4" in \
        out["data_branch_why"]
    assert "declares no image processor" not in out["data_branch_why"]


def test_a_loaded_remote_processor_that_makes_its_own_pixels_is_named(tmp_path):
    """DeepSeek-VL2-style: AutoProcessor reaches and loads the remote processor, which tiles the images in its own
    methods but has no ``image_processor`` attribute: the branch-C reason names it as the pixel code, not 'the
    folder declares no image processor'."""
    from msmigrate.agent.nodes.plan import processor_branch
    from msmigrate.tools.runtime_processor import RuntimeProcessor

    loaded = RuntimeProcessor(ok=True, loaded=True, processor_class="TilerProcessor", kind="processor",
                              handles_images=False)
    plan = {"template": "tiler", "collator": "tiler", "reasons": []}
    src = folder(tmp_path, {"AutoProcessor": "processing_tiler.TilerProcessor"})
    why = processor_branch(src, "tiler", loaded, plan)["data_branch_why"]
    assert "builds the processor around the loaded TilerProcessor itself" in why
    assert "processing_tiler.py:4; its own methods: crops" in why and "declares no image processor" not in why


def test_an_unmeasured_remote_processor_is_pointed_at(tmp_path):
    """Held-out Molmo-style processor: no chat template, images expanded in its own ``process``; the media
    expansion probe measures nothing, so the plan names the code that does it."""
    from types import SimpleNamespace

    from msmigrate.agent.nodes.plan import make_plan
    from msmigrate.tools.media_expansion import MediaExpansion
    from msmigrate.tools.repo_reader.processor_code import describe_unmeasured

    src_dir = folder(tmp_path, {"AutoProcessor": "processing_tiler.TilerProcessor"})
    said = describe_unmeasured(declared_processor_code(src_dir))
    assert "TilerProcessor is remote code (processing_tiler.py:4; its own methods: crops)" in said
    src = {"needs_trust_remote_code": True, "architectures": ["T"], "custom_code_files": ["processing_tiler.py"],
           "forward": {"signature": "forward(self, input_ids, images=None, labels=None)"}, "auto_map": {}}
    state = {"source_summary": src, "target_summary": {"templates": [], "similar_cases": [{"example": "e.yaml"}]}}
    deps = SimpleNamespace(ctx=SimpleNamespace(model_name="tiler", source=src_dir))
    failed = MediaExpansion(ok=False, error="no image placeholder: no chat template")
    assert said in make_plan(deps, state, failed)["reasons"]
    measured_elsewhere = make_plan(SimpleNamespace(ctx=SimpleNamespace(model_name="tiler", source=tmp_path / "x")),
                                   state, failed)
    assert not any("is remote code (" in r for r in measured_elsewhere["reasons"])


def test_a_remote_forward_without_an_image_argument_is_a_plan_fact():
    """Qwen-VL-Chat-style: the remote forward takes only text inputs (the ids name each image's path); the plan says
    so instead of implying a pixel_values contract. A forward with an image argument, or native code, says nothing."""
    from msmigrate.agent.nodes.plan import no_media_argument

    vision = ("decoder", "decoder-only language model with a vision encoder")
    src = {"needs_trust_remote_code": True, "forward": {"file": "modeling_qwen.py", "line": 163, "signature":
           "forward(self, input_ids=None, past_key_values=None, attention_mask=None, labels=None, **kwargs)"}}
    said = no_media_argument(src, vision)
    assert said.startswith("the source's forward (modeling_qwen.py:163) takes no image argument, only "
                           "['attention_mask', 'input_ids', 'labels', 'past_key_values']")
    with_images = {**src, "forward": {"signature": "forward(self, input_ids=None, images=None, labels=None)"}}
    assert no_media_argument(with_images, vision) is None
    assert no_media_argument({**src, "needs_trust_remote_code": False}, vision) is None
    assert no_media_argument(src, ("encoder-decoder", "config.json is_encoder_decoder")) is None
