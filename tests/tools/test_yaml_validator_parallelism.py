"""Plans of a parallelism that is off are never applied, so the pattern audit skips them."""

from __future__ import annotations


def test_ep_plan_is_not_audited_without_expert_parallelism():
    from msmigrate.tools.yaml_validator.patterns import ModuleTree, pattern_checks

    tree = ModuleTree.from_dict({"names": ["", "model", "model.layers", "model.layers.0", "model.layers.0.mlp"],
                                 "classes": {}, "no_split_modules": []})
    data = {"parallel": {"expert_parallel_size": 1, "ep_plan": {"apply_modules": ["model.layers.{*}.mlp.experts"]}}}
    assert not [f for f in pattern_checks(data, tree) if f.path.startswith("parallel.ep_plan")]
    data["parallel"]["expert_parallel_size"] = 2
    assert [f.code for f in pattern_checks(data, tree) if f.path.startswith("parallel.ep_plan")] == ["pattern-no-match"]


def test_pattern_syntax_is_checked_without_a_module_tree():
    from msmigrate.tools.yaml_validator.patterns import pattern_syntax_checks

    data = {"parallel": {"fsdp_plan": {"apply_modules": ["model.layers.{x-y}", "model.layers.{*}"]}}}
    assert [(f.code, f.path) for f in pattern_syntax_checks(data)] == [
        ("pattern-invalid", "parallel.fsdp_plan.apply_modules[0]")]
