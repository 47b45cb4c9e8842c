"""Plan from evidence: template choice (branch A/B), collator choice, similar-case ranking."""

from __future__ import annotations

from types import SimpleNamespace

from msmigrate.agent.nodes.plan import GENERIC_COLLATOR, choose_collator, choose_template, make_plan
from msmigrate.agent.similar_case import rank_similar_cases

QWEN_TMPL = {"id": "qwen2vl", "extra": {"image_token": "<|image_pad|>", "stop_words": ["<|im_end|>"],
                                        "mm_plugin": "qwen2_vl"}}
QWEN3_TMPL = {"id": "qwen3_vl", "extra": {"image_token": "<|image_pad|>", "stop_words": ["<|im_end|>"],
                                          "mm_plugin": "qwen3_vl"}}
GLM_TMPL = {"id": "glm4.1v", "extra": {"image_token": "<|image|>", "stop_words": ["<|user|>"], "mm_plugin": "glm4.1v"}}
NO_STOP = {"id": "nostop", "extra": {"image_token": "<|image_pad|>", "stop_words": [], "mm_plugin": "x"}}


def qwen_src(model_type="qwen2_vl", chat="<|im_start|>user ...<|im_end|>"):
    return {"model_type": model_type, "tokens": {"media_tokens": {"<|image_pad|>": 5, "<|video_pad|>": 6},
                                                 "special_tokens": {"eos_token": "<|im_end|>"}},
            "chat_template": {"text": chat}}


def test_template_fits_when_image_token_and_stop_words_match_and_closest_name_wins():
    best, why = choose_template(qwen_src(), [GLM_TMPL, QWEN3_TMPL, QWEN_TMPL, NO_STOP])
    assert best["id"] == "qwen2vl" and "image token '<|image_pad|>'" in why[0]
    best, _ = choose_template(qwen_src("qwen3_vl"), [QWEN_TMPL, QWEN3_TMPL])
    assert best["id"] == "qwen3_vl"


def test_stop_word_found_among_source_tokens_counts_too():
    best, _ = choose_template(qwen_src(chat="no stop word in the text"), [QWEN_TMPL])
    assert best["id"] == "qwen2vl"  # <|im_end|> is the source's eos token


def test_no_fit_means_branch_b_with_a_reason():
    src = {"model_type": "llava", "tokens": {"media_tokens": {"<image>": 32000}}, "chat_template": {"text": "USER:"}}
    best, why = choose_template(src, [QWEN_TMPL, GLM_TMPL])
    assert best is None and "['<image>']" in why[0]


def test_collator_choice_from_forward_parameters():
    assert choose_collator({}, "fakevl")[:2] == (GENERIC_COLLATOR, [])
    takes = {"forward": {"parameters": [{"name": "input_ids"}, {"name": "mm_token_type_ids"}]}}
    assert choose_collator(takes, "fakevl")[:2] == (GENERIC_COLLATOR, [])
    lacks = {"forward": {"params": ["input_ids", "pixel_values"]}}
    assert choose_collator(lacks, "fakevl")[:2] == ("fakevl", ["mm_token_type_ids"])


def test_make_plan_on_the_real_fixture_and_standin(workspace):
    src, inv = workspace["summary"].data, workspace["inventory"].data
    ranked = rank_similar_cases(src, inv)
    deps = SimpleNamespace(ctx=SimpleNamespace(model_name="fakevl"))
    plan = make_plan(deps, {"source_summary": src, "target_summary": {**inv, "similar_cases": ranked}})
    assert plan["route"] == "transformers" and plan["hf_class"] == "Qwen2VLForConditionalGeneration"
    assert plan["data_branch"] == "A" and plan["template"] == "qwen2vl" and plan["mm_plugin"] == "qwen2_vl"
    assert plan["collator"] == GENERIC_COLLATOR
    assert plan["similar_case"] == "examples/qwen3vl/qwen3vl_config.yaml"
    assert plan["config_path"] == "examples/fakevl/fakevl_config.yaml"


# --- similar cases ---------------------------------------------------------------------------------------------

INVENTORY = {
    "model_ids": [{"id": "qwen3_vl", "target": "Qwen3VLForConditionalGeneration", "bases": ["HFQwen3VL"]},
                  {"id": "tiny_custom_lm", "target": "TinyCustomLM", "bases": ["torch.nn.Module", "BaseModel"]}],
    "templates": [QWEN3_TMPL],
    "examples": [
        {"file": "examples/b_custom.yaml", "model_id": "tiny_custom_lm", "dataset_type": "huggingface",
         "template": "default"},
        {"file": "examples/a_qwen.yaml", "model_id": "qwen3_vl", "dataset_type": "huggingface", "template": "qwen3_vl"},
        {"file": "examples/broken.yaml", "parse_error": "bad yaml"},
        {"file": "examples/bridge.yaml", "route": "bridge", "model_id": "qwen3_vl"},
    ],
}


def test_ranking_prefers_same_family_and_media_tokens():
    ranked = rank_similar_cases(qwen_src(), INVENTORY)
    assert [c["example"] for c in ranked] == ["examples/a_qwen.yaml", "examples/b_custom.yaml"]
    top = ranked[0]
    assert top["score"] == 3 + 2 + 1 + 1
    assert top["why"] == ["same family 'qwen'", "template qwen3_vl uses media token(s) ['<|image_pad|>']",
                          "same build path (transformers class)", "generic huggingface dataset"]
    assert ranked[1]["score"] == 1 and ranked[1]["why"] == ["generic huggingface dataset"]


def test_custom_code_source_ranks_the_custom_example_up():
    src = {"model_type": "patchlm", "needs_trust_remote_code": True, "tokens": {"media_tokens": {"<|image|>": 3}}}
    ranked = rank_similar_cases(src, INVENTORY)
    assert ranked[0]["example"] == "examples/b_custom.yaml" and ranked[0]["score"] == 2
    assert "same build path (custom BaseModel)" in ranked[0]["why"]


def test_ties_break_by_name_and_nothing_shared_is_said():
    inv = {"examples": [{"file": "examples/z.yaml"}, {"file": "examples/m.yaml"}]}
    ranked = rank_similar_cases({}, inv)
    assert [c["example"] for c in ranked] == ["examples/m.yaml", "examples/z.yaml"]
    assert ranked[0]["why"] == ["no shared signal"] and ranked[0]["score"] == 0


def test_remote_code_with_an_automodel_entry_ranks_the_transformers_example_up():
    # InternVL-chat style: trust_remote_code, but auto_map names AutoModel, so ModelHub's transformers path loads it
    src = {"model_type": "internvl_chat", "needs_trust_remote_code": True,
           "auto_map": {"AutoConfig": "c.C", "AutoModel": "m.M"}, "tokens": {"media_tokens": {"<img>": 3}}}
    ranked = rank_similar_cases(src, INVENTORY)
    assert ranked[0]["example"] == "examples/a_qwen.yaml"
    assert "same build path (transformers class)" in ranked[0]["why"]
    assert not any("same build path" in w for w in ranked[1]["why"])


def test_a_new_template_takes_the_checkpoints_own_name(tmp_path):
    import json

    from msmigrate.agent.nodes.plan import new_template_id

    (tmp_path / "config.json").write_text(json.dumps({"template": "internvl2_5", "chat_template": "{% for m in x %}"}))
    assert new_template_id(tmp_path, [{"id": "qwen2vl"}], "internvl_chat") == (
        "internvl2_5", "new template named 'internvl2_5': the checkpoint's config.json names its chat format "
                       "('template')")
    # already registered in the target: a new one must not collide, so the model name it is
    assert new_template_id(tmp_path, [{"id": "internvl2_5"}], "internvl_chat") == ("internvl_chat", None)
    (tmp_path / "config.json").write_text(json.dumps({"chat_template": "{{ bos_token }}"}))  # jinja is no id
    assert new_template_id(tmp_path, [], "foo") == ("foo", None)


def test_no_template_by_token_names_when_the_measured_expansion_failed():
    """Branch A used to be chosen by token names although the source processor's measured expansion had failed (a
    processor writing per-image numbered ids): the mm_plugin of that template then expands images its own way."""
    from msmigrate.tools.media_expansion import ImageExpansion, MediaExpansion

    failed = MediaExpansion(ok=False, error="the two-image expansion is not the one-image expansion repeated")
    best, why = choose_template(qwen_src(), [QWEN_TMPL], failed)
    assert best is None and "media expansion failed" in why[0] and "two-image" in why[0]
    one = ImageExpansion(image="a.png", size=[28, 28], count=4, length=6, text="", prefix=["<|vision_start|>"],
                         suffix=["<|vision_end|>"])
    wrote_pad = MediaExpansion(ok=True, media_token="<|image_pad|>", per_image=[one])
    assert choose_template(qwen_src(), [QWEN_TMPL], wrote_pad)[0]["id"] == "qwen2vl"
    # a media token the tokenizer names but the processor never wrote does not make a template fit
    wrote_other = MediaExpansion(ok=True, media_token="<|placeholder|>", per_image=[one])
    assert choose_template(qwen_src(), [QWEN_TMPL], wrote_other)[0] is None
