"""The processor the target runtime really loads (probes/processor_class.py, AutoProcessor in the runtime) and what
the plan makes of it. Expectations come from transformers' own behaviour: a folder that declares no processor class
gets its tokenizer back from AutoProcessor; a native family with a processor class gets that processor."""

from __future__ import annotations

import json
import sys

import pytest

from msmigrate.tools.runtime_processor import RuntimeProcessor, probe_runtime_processor


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    from msmigrate.testbeds.fixtures import build_source

    root = tmp_path_factory.mktemp("runtime_processor")
    return {name: build_source(name, root / name) for name in ("internvl_chat", "llava")}


def test_internvl_chat_remote_code_loads_a_bare_tokenizer(sources, tmp_path):
    # the checkpoint ships a tokenizer and a CLIP image-processor config, but no processor class
    rp = probe_runtime_processor(sys.executable, sources["internvl_chat"], trust_remote_code=True, run_dir=tmp_path)
    assert rp.ok and rp.loaded, rp.error or rp.load_error
    assert rp.kind == "tokenizer" and not rp.handles_images and "image_processor" not in rp.parts
    assert "without an image processor" in rp.note() and rp.processor_class in rp.note()
    saved = json.loads((tmp_path / "probes" / "processor_class.json").read_text())
    assert saved["kind"] == "tokenizer" and saved["trust_remote_code"] is True


def test_native_family_loads_its_processor(sources):
    rp = probe_runtime_processor(sys.executable, sources["llava"])
    assert rp.ok and rp.loaded and rp.kind == "processor" and rp.processor_class == "LlavaProcessor"
    assert rp.handles_images and {"tokenizer", "image_processor"} <= set(rp.parts)


def test_a_folder_autoprocessor_cannot_load_is_a_fact(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    rp = probe_runtime_processor(sys.executable, tmp_path)
    assert rp.ok and not rp.loaded and rp.load_error
    assert "AutoProcessor fails" in rp.note()


def test_plan_facts_take_the_runtime_answer_over_the_declared_files(tmp_path):
    from msmigrate.agent.nodes.plan import custom_code_facts

    (tmp_path / "config.json").write_text(json.dumps({"auto_map": {"AutoModel": "m.M"}}))
    (tmp_path / "processor_config.json").write_text("{}")  # declares one, but the runtime gets a tokenizer
    src = {"forward": {"signature": "forward(self, input_ids, **kwargs)"}, "tokens": {}}
    bare = RuntimeProcessor(ok=True, loaded=True, processor_class="Qwen2TokenizerFast", kind="tokenizer")
    facts, _, _ = custom_code_facts(tmp_path, src, bare)
    assert facts["declared_processor"] == "processor_config.json"
    assert facts["runtime_processor"]["processor_class"] == "Qwen2TokenizerFast"
    assert "without an image processor" in facts["processor_note"]
    real = RuntimeProcessor(ok=True, loaded=True, processor_class="XProcessor", kind="processor",
                            parts={"tokenizer": "T", "image_processor": "I"}, handles_images=True)
    assert custom_code_facts(tmp_path, src, real)[0]["processor_note"] is None
    failed = RuntimeProcessor(ok=False, error="probe processor_class timed out")
    # a failed probe leaves the declared-files guess in place, and the fact records the failure
    facts, _, _ = custom_code_facts(tmp_path, src, failed)
    assert facts["processor_note"] is None and facts["runtime_processor"]["error"]


def test_the_plan_recommends_a_dataset_plugin_when_the_runtime_gets_no_image_processor(sources):
    """The plan reads what the runtime really loads and says which branch and why: for a bare tokenizer the target's
    load_tokenizer hands the huggingface dataset no processor, so B as planned cannot make pixel_values (both live
    players found this by reading the loader); with a real processor the plan stays on the huggingface dataset."""
    from types import SimpleNamespace

    from msmigrate.agent.nodes.plan import make_plan
    from msmigrate.tools.repo_reader.hf_summary import hf_summary

    source = sources["internvl_chat"]
    src = hf_summary(source, None).data
    deps = SimpleNamespace(ctx=SimpleNamespace(model_name="internvl_chat", source=source))
    state = {"source_summary": src, "target_summary": {"templates": [], "similar_cases": [{"example": "e.yaml"}]}}
    bare = probe_runtime_processor(sys.executable, source, trust_remote_code=True)
    plan = make_plan(deps, state, runtime_processor=bare)
    assert plan["data_branch"] == "C" and plan["dataset_type"] == "internvl_chat"
    assert plan["data_plugin"] == "mindspeed_mm/fsdp/data/datasets/internvl_chat"
    why = plan["data_branch_why"]
    assert f"AutoProcessor → {bare.processor_class} (tokenizer)" in why and "processor=None" in why
    assert "CLIPImageProcessor" in why  # the image processor the folder itself declares
    assert why in plan["reasons"]
    # one recommended build path with its reason, for remote code too (not "route: custom")
    assert plan["build_path"] == "transformers" and plan["build_path_why"].startswith("build path transformers")
    # the build path agrees with the model contract: no weight init relied on (a resumed load skips init_weights)
    assert "HF weight init" not in plan["build_path_why"] and "never from init_weights" in plan["build_path_why"]
    # branch C asks for one batching path, the one the target's dataloader uses (no collate_wiring read here)
    plain = why.replace("`", "")  # wiring_facts.collate_advice marks names as code
    assert "give the dataset no collate_fn" in plain and f"collator {plan['collator']}" in plain
    wired = make_plan(deps, {**state, "target_summary": {**state["target_summary"], "collate_wiring": {
        "dataset_collate_fn_wins": True, "in": "build_loader", "at": "d.py:7"}}}, runtime_processor=bare)
    assert "instead of the collator (build_loader, d.py:7)" in wired["data_branch_why"].replace("`", "")
    # the prompt says each once: on the plan's branch / build path lines, not again among the reasons
    from msmigrate.prompts.render import render
    from msmigrate.prompts.sample_state import sample_vars

    values = sample_vars("data", live_index=False)
    values["plan"] = {**plan, "branch": plan["data_branch"]}
    text = render("data", **values)
    assert text.count(why) == 1 and text.count(plan["build_path_why"]) == 1
    assert f"- data branch: C — {why}" in text
    real = RuntimeProcessor(ok=True, loaded=True, processor_class="XProcessor", kind="processor",
                            parts={"tokenizer": "T", "image_processor": "I"}, handles_images=True)
    kept = make_plan(deps, state, runtime_processor=real)
    assert kept["data_branch"] == "B" and kept["dataset_type"] == "huggingface"
    assert "new template, mm_plugin" in kept["data_branch_why"]
