import pytest

from msmigrate.tools.module_match import compile_pattern, match_any, matching_names, module_name_match


@pytest.mark.parametrize(
    "pattern,name,expected",
    [
        # contract §5.1 examples
        ("model.visual.blocks.{*}", "model.visual.blocks.0", True),
        ("model.visual.blocks.{*}", "model.visual.blocks.12", True),
        ("model.visual.blocks.{*}", "model.visual.blocks", False),
        ("model.visual.blocks.{*}", "model.visual.blocks.0.attn", False),
        ("model.visual", "model.visual", True),
        ("model.visual", "model.visual.blocks", False),  # no prefix semantics
        ("visual.blocks.{*}", "model.visual.blocks.0", False),  # full path required
        ("*.blocks.{*}", "model.visual.blocks.0", True),
        ("model.layers.{0-3}", "model.layers.3", True),
        ("model.layers.{0-3}", "model.layers.0", True),
        ("model.layers.{0-3}", "model.layers.4", False),
        ("*", "", True),
        ("*", "model.language_model.layers.7.mlp", True),
        # more
        ("model.layers.{*}", "model.layers.x", False),  # {*} is digits only
        ("model.layers.{*}", "model.layers.", False),  # at least one digit
        ("model.layers.{2-10}", "model.layers.10", True),
        ("model.layers.{2-10}", "model.layers.11", False),
        ("model.layers.{2-10}", "model.layers.01", False),  # int("01") == 1 < 2
        ("model.layers.{2-10}", "model.layers.02", True),  # int("02") == 2: the target compares integers
        ("model.layers.?", "model.layers.7", True),
        ("model.layers.?", "model.layers.17", False),
        ("model?layers", "model.layers", True),  # ? crosses dots too
        ("model.layers", "modelXlayers", False),  # . is literal
        ("lm_head", "lm_head", True),
        ("model.*", "model.a.b.c", True),
        ("model.*", "model", False),
        ("a+b(c)", "a+b(c)", True),  # regex metacharacters are escaped
        ("blocks.{*}.mlp.{*}", "blocks.1.mlp.22", True),
        ("blocks.{0-1}.mlp.{5-6}", "blocks.1.mlp.7", False),
        ("model.{layer", "model.{layer", True),  # unclosed brace is literal
    ],
)
def test_module_name_match(pattern, name, expected):
    assert module_name_match(pattern, name) is expected


@pytest.mark.parametrize(
    "pattern,message",
    [
        ("model.layers.{x}", "Unrecognized brace pattern: x"),
        ("model.layers.{}", "Unrecognized brace pattern: "),
        ("model.layers.{1-2-3}", "Invalid brace pattern: 1-2-3"),
        ("model.layers.{a-3}", "Non-integer in range: a-3"),
        ("model.layers.{5-3}", "Invalid range: 5-3 (low > high)"),
    ],
)
def test_bad_braces_raise_target_messages(pattern, message):
    with pytest.raises(ValueError) as info:
        compile_pattern(pattern)
    assert str(info.value) == message


def test_helpers():
    names = ["", "model", "model.layers.0", "model.layers.1", "model.layers.1.mlp"]
    assert matching_names("model.layers.{*}", names) == ["model.layers.0", "model.layers.1"]
    assert match_any(["nope", "model"], "model")
    assert not match_any([], "model")
