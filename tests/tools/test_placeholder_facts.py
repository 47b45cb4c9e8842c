"""The target's media placeholders, read from its mm_plugin module, and a source expansion that writes one back
(held-out MiniCPM-V-style slicer: its own image start token is `<image>`, so the target's replace-in-a-loop
pattern re-expanded its own output and the data check died with IndexError)."""

from __future__ import annotations

from types import SimpleNamespace

from msmigrate.tools.repo_reader.placeholder_facts import placeholder_collision, target_placeholders


def test_the_standin_placeholders_are_read(tmp_path):
    from msmigrate.testbeds.standin import write_standin

    target = write_standin(tmp_path / "t", git_init=False, with_assets=False)
    found = target_placeholders(target)
    assert found["image"]["text"] == "<image>" and found["image"]["at"].startswith(
        "mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py:")
    assert target_placeholders(tmp_path / "nothing") == {}


def test_a_colliding_expansion_is_said():
    places = {"image": {"text": "<image>", "at": "mm_plugin.py:17"}}
    assert placeholder_collision(["<im><unk></im>"], places) is None
    said = placeholder_collision(["<image><unk><unk></image>\n"], places)
    assert "'<image>' (IMAGE_PLACEHOLDER, mm_plugin.py:17)" in said and "one pass" in said


def test_the_plan_names_the_collision(tmp_path, monkeypatch):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
    from test_plan_remote_processor import PROCESSOR, expansion

    from msmigrate.agent.nodes.plan import make_plan

    mm = tmp_path / "mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py"
    mm.parent.mkdir(parents=True)
    mm.write_text('import os\nIMAGE_PLACEHOLDER = os.getenv("IMAGE_PLACEHOLDER", "<im>")\n')
    src = {"needs_trust_remote_code": True, "architectures": ["S"], "custom_code_files": [], "auto_map": {},
           "forward": {"signature": "forward(self, data, **kwargs)"}}
    state = {"source_summary": src, "target_summary": {"templates": [], "similar_cases": [{"example": "e.yaml"}]}}
    deps = SimpleNamespace(ctx=SimpleNamespace(model_name="s", source=tmp_path / "src", target=tmp_path))
    plan = make_plan(deps, state, expansion([(20, 33)]), runtime_processor=PROCESSOR)  # its text: "<im>…</im>\n"
    assert any("contains the target's image placeholder '<im>'" in r for r in plan["reasons"])
    mm.write_text('IMAGE_PLACEHOLDER = "<picture>"\n')
    plan = make_plan(deps, state, expansion([(20, 33)]), runtime_processor=PROCESSOR)
    assert not any("image placeholder" in r for r in plan["reasons"])
