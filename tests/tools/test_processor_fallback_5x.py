"""The composed processor fallback (probes/_processor.py) on a folder saved by transformers 5.x, and the advice a run
gets when the source's processor needs a package the runtime lacks.

transformers 5.x writes each sub-processor's settings INTO processor_config.json (``"image_processor": {...}``);
the fallback passed those entries on as keyword arguments next to the loaded image processor and crashed with
"got multiple values for argument 'image_processor'". A processor that needs torchvision (every 5.x video
processor) ended the run telling the user to use ``--policy llm``: the fix is an install in the runtime."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import msmigrate

PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"


@pytest.fixture(scope="module")
def saved_by_5x(tmp_path_factory):
    """A tiny Qwen2-VL processor folder as transformers 5.x saves it (nested sub-processor settings, no
    preprocessor_config.json), recorded as the family's own processor class (which has a video processor)."""
    import transformers

    from msmigrate.testbeds.fixtures.native_families import qwen2_vl

    sys.path.insert(0, str(PROBES))
    try:
        sys.modules.pop("_processor", None)
        from _processor import image_only_class
    finally:
        sys.path.remove(str(PROBES))
    parts = qwen2_vl()
    folder = tmp_path_factory.mktemp("qwen2_vl_5x")
    composed = image_only_class(transformers.Qwen2VLProcessor)
    composed(parts.image_processor, parts.tokenizer, chat_template=parts.tokenizer.chat_template).save_pretrained(folder)
    cfg = json.loads((folder / "processor_config.json").read_text())
    assert isinstance(cfg.get("image_processor"), dict)  # the 5.x layout this test is about
    cfg["processor_class"] = "Qwen2VLProcessor"
    (folder / "processor_config.json").write_text(json.dumps(cfg))
    assert not (folder / "preprocessor_config.json").exists()
    return folder


def test_fallback_loads_a_processor_config_saved_by_5x(saved_by_5x, monkeypatch):
    from PIL import Image
    from transformers.utils import is_torchvision_available

    if is_torchvision_available():
        pytest.skip("this runtime loads the whole processor (torchvision installed)")
    monkeypatch.syspath_prepend(str(PROBES))
    sys.modules.pop("_processor", None)
    from _processor import load_processor

    proc, how, cls_name, _ = load_processor(str(saved_by_5x), False)
    assert cls_name == "Qwen2VLProcessor" and "composed" in how
    out = proc(text=["<|vision_start|><|image_pad|><|vision_end|>hi"], images=[Image.new("RGB", (56, 56))])
    pad = proc.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert list(out["input_ids"][0]).count(pad) == 4  # a 4x4 patch grid merged 2x2: the image processor was used
    assert "pixel_values" in out and "image_grid_thw" in out


def test_a_missing_runtime_package_gets_install_advice_not_another_policy():
    import transformers

    from msmigrate.agent.policies.base import PhaseUnsupported
    from msmigrate.tools.missing_package import missing_package

    try:  # transformers' own words for a processor that needs torchvision, where it is missing
        transformers.Qwen2VLVideoProcessor()
        pytest.skip("torchvision is installed here")
    except ImportError as exc:
        error = f"ImportError: {exc}"
    exc = PhaseUnsupported("data branch B (media expansion)",
                           f"the source processor did not show how an image becomes tokens: {error}")
    assert "install torchvision in the target runtime" in exc.line
    assert "--policy llm" not in exc.line
    # other reasons keep the default advice; a dotted module is not a package to install
    assert "--policy llm" in PhaseUnsupported("x", "no image placeholder").line
    assert missing_package("No module named 'transformers.models.foo'") is None
    assert missing_package("ModuleNotFoundError: No module named 'cv2'") == "opencv-python"
