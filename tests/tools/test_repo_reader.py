"""repo_reader: bounded tree/read/grep, Python outline with MindSpeed-MM registrations, target inventory.

The mini-tree mirrors the real MindSpeed-MM file layout and registration idioms (contract §4, §8, §12)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import git
import pytest

from msmigrate.core.run_context import RunContext
from msmigrate.tools.repo_reader import grep, outline, read_lines, repo_reader_tools, target_inventory, tree

MINI_TREE = {
    "mindspeed_mm/__init__.py": "",
    "mindspeed_mm/fsdp/utils/register.py": """
        class Register:
            def __init__(self):
                self._d = {}

            def register(self, obj_id):
                def deco(obj):
                    self._d[obj_id] = obj
                    return obj
                return deco

        model_register = Register()
        data_register = Register()
    """,
    "mindspeed_mm/fsdp/models/foo/modeling_foo.py": """
        from mindspeed_mm.fsdp.utils.register import model_register


        class FooPreTrainedModel:
            pass


        @model_register.register("foo")
        class FooForConditionalGeneration(FooPreTrainedModel):
            def forward(self, input_ids=None, labels=None, **kwargs) -> dict:
                return {}

            @classmethod
            def overwrite_transformer_config(cls, transformer_config, model_args, feature_args):
                return transformer_config
    """,
    "mindspeed_mm/fsdp/models/bar/__init__.py": """
        from mindspeed_mm.fsdp.utils import register


        class BarModel:
            pass


        try:
            BarModel = register.model_register.register("bar")(BarModel)
        except KeyError:
            raise ValueError("again")
    """,
    "mindspeed_mm/fsdp/models/baz/modeling_baz.py": """
        from mindspeed_mm.fsdp.utils.register import model_register


        def get_baz_model(config):
            return None


        model_register.register("baz_fn")(get_baz_model)
    """,
    "mindspeed_mm/fsdp/data/datasets/huggingface/hf_dataset.py": """
        from mindspeed_mm.fsdp.utils.register import data_register


        @data_register.register("huggingface")
        def get_hf_dataset(basic_param, preprocess_param, dataset_param):
            return []
    """,
    "mindspeed_mm/fsdp/data/data_utils/func_utils/template.py": '''
        TEMPLATES = {}


        def _register_template(name, params, mm_plugin=None, template_class=None):
            """Example usage, which must not count as a registration:
            _register_template(name="custom", params=RegisterParams())
            """
            TEMPLATES[name] = params


        _register_template(
            name="qwen2vl",
            params=RegisterParams(stop_words=["<|im_end|>"], replace_eos=True),
            mm_plugin=get_mm_plugin(name="qwen2_vl", image_token="<|image_pad|>", video_token="<|video_pad|>"),
        )
        _register_template("empty", RegisterParams())
    ''',
    "mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py": """
        class BasePlugin:
            pass


        class Qwen2VLPlugin(BasePlugin):
            pass


        PLUGINS = {
            "base": BasePlugin,
            "qwen2_vl": Qwen2VLPlugin,
        }
    """,
    "mindspeed_mm/fsdp/data/dataloader/data_collator.py": """
        class DataCollatorForQwen2vl:
            pass


        DATA_COLLATOR = {}


        def _register_data_collator(name, collator_cls):
            DATA_COLLATOR[name] = collator_cls


        _register_data_collator(
            "qwen3vl",
            DataCollatorForQwen2vl,
        )
    """,
    "examples/foo/foo_config.yaml": """
        parallel:
          fsdp_plan:
            apply_modules:
              - model.visual.blocks.{*}
              - lm_head
        data:
          dataset_param:
            dataset_type: huggingface
            basic_parameters:
              template: qwen2vl
          dataloader_param:
            collate_param:
              collator_id: qwen3vl
        model:
          model_id: foo
          model_name_or_path: /data/foo
        training:
          plugin:
            - mindspeed_mm/fsdp/models/foo
            - mindspeed_mm/fsdp/data/datasets/huggingface
    """,
    "examples/foo/finetune_foo.sh": """
        export NON_MEGATRON=true
        torchrun $DISTRIBUTED_ARGS mindspeed_mm/fsdp/train/trainer.py examples/foo/foo_config.yaml
    """,
    "examples/broken/broken_config.yaml": """
        model:
          model_id: bar
          path: &P /a
        data:
          path: &P /b
    """,
    "examples/legacy/fsdp2_config.yaml": """
        sharding_size: auto
        sub_modules_to_wrap:
          - model.layers.{*}
    """,
    "docs/big.txt": "\n".join(f"line {i} needle" if i % 10 == 0 else f"line {i}" for i in range(1, 2001)),
    ".gitignore": "*.log\ncache_dir/\n",
}


def build_mini_tree(root: Path, with_git: bool = True) -> Path:
    for rel, text in MINI_TREE.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    (root / "train.log").write_text("needle in an ignored file\n")
    (root / "cache_dir").mkdir()
    (root / "cache_dir" / "x.py").write_text("needle = 1\n")
    if with_git:
        repo = git.Repo.init(root)
        repo.git.add("-A")  # leave it uncommitted on purpose: untracked + ignored files must both be handled
    return root


@pytest.fixture(scope="module")
def mm(tmp_path_factory) -> Path:
    return build_mini_tree(tmp_path_factory.mktemp("mm"))


def test_tree_is_gitignore_aware_and_bounded(mm: Path):
    result = tree(mm, max_depth=2)
    assert result.ok
    assert "train.log" not in result.data["tree"] and "cache_dir" not in result.data["tree"]
    assert "examples/" in result.data["tree"]
    # deeper files are only counted, under their depth-2 directory
    assert result.data["deeper_file_counts"]["mindspeed_mm/fsdp"] == 8
    small = tree(mm, max_depth=6, max_entries=5)
    assert small.data["entries_cut"] > 0 and len(small.data["tree"].splitlines()) == 5


def test_tree_without_git_uses_skip_list(tmp_path: Path):
    root = build_mini_tree(tmp_path / "plain", with_git=False)
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "a.pyc").write_bytes(b"\0")
    text = tree(root, max_depth=8).data["tree"]
    assert "__pycache__" not in text and "cache_dir" not in text and "modeling_foo.py" in text


def test_read_lines_keeps_head_and_tail(mm: Path):
    result = read_lines(mm, "docs/big.txt", 1, None, max_lines=40)
    assert result.ok and result.data["total_lines"] == 2000
    assert result.data["lines_cut"] == 2000 - 30 - 10
    assert result.data["text"].startswith("1: line 1") and result.data["text"].endswith("2000: line 2000 needle")
    # the cut says which range shows what it left out
    assert "\n… [1960 lines cut: read start=31 end=1990 for them] …\n1991: " in result.data["text"]
    span = read_lines(mm, "docs/big.txt", 10, 12)
    assert span.data["text"] == "10: line 10 needle\n11: line 11\n12: line 12"
    assert not read_lines(mm, "docs/big.txt", 3000, 3001).ok


def test_read_lines_of_an_empty_file_is_an_answer(tmp_path: Path):
    (tmp_path / "__init__.py").write_text("")
    empty = read_lines(tmp_path, "__init__.py")
    assert empty.ok and empty.data["text"] == "" and empty.data["total_lines"] == 0


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "docs/../../x", "missing.txt"])
def test_read_outside_or_missing_is_a_failure(mm: Path, path: str):
    assert not read_lines(mm, path).ok


def test_grep_bounded_and_ignores_ignored_files(mm: Path):
    result = grep(mm, r"needle", max_hits=5)
    assert result.ok and result.data["total_hits"] == 200 and len(result.data["hits"]) == 5
    assert result.data["hits_cut"] == 195
    assert not any("train.log" in h or "cache_dir" in h for h in result.data["hits"])
    scoped = grep(mm, r"register\(", subdir="mindspeed_mm/fsdp/models", glob="*.py")
    assert scoped.data["total_hits"] == 3
    assert not grep(mm, "(unclosed").ok


def test_outline_classes_signatures_and_decorator_registration(mm: Path):
    result = outline(mm, "mindspeed_mm/fsdp/models/foo/modeling_foo.py")
    assert result.ok
    cls = next(c for c in result.data["classes"] if c["name"] == "FooForConditionalGeneration")
    assert cls["bases"] == ["FooPreTrainedModel"] and cls["decorators"] == ["model_register.register('foo')"]
    fwd = next(m for m in cls["methods"] if m["name"] == "forward")
    assert fwd["signature"] == "forward(self, input_ids=None, labels=None, **kwargs) -> dict"
    ow = next(m for m in cls["methods"] if m["name"] == "overwrite_transformer_config")
    assert ow["decorators"] == ["classmethod"]
    [reg] = result.data["registrations"]
    assert (reg["kind"], reg["id"], reg["target"], reg["line"]) == ("model", "foo", "FooForConditionalGeneration", 8)


def test_outline_call_form_template_and_tables(mm: Path):
    bar = outline(mm, "mindspeed_mm/fsdp/models/bar/__init__.py").data["registrations"]
    assert [(r["id"], r["target"], r["extra"].get("call_form")) for r in bar] == [("bar", "BarModel", True)]
    tpl = outline(mm, "mindspeed_mm/fsdp/data/data_utils/func_utils/template.py").data["registrations"]
    assert [r["id"] for r in tpl] == ["qwen2vl", "empty"]  # the docstring example is not a registration
    assert tpl[0]["extra"] == {"mm_plugin": "qwen2_vl", "image_token": "<|image_pad|>",
                               "video_token": "<|video_pad|>", "stop_words": ["<|im_end|>"]}
    plugins = outline(mm, "mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py").data["registrations"]
    assert {(r["id"], r["target"]) for r in plugins} == {("base", "BasePlugin"), ("qwen2_vl", "Qwen2VLPlugin")}


def test_outline_refuses_invalid_python(tmp_path: Path):
    (tmp_path / "bad.py").write_text("def f(:\n")
    result = outline(tmp_path, "bad.py")
    assert not result.ok and "does not parse" in result.error


def test_target_inventory_on_mini_tree(mm: Path):
    result = target_inventory(mm)
    assert result.ok, result.error
    ids = result.data["ids"]
    assert ids == {"model": ["bar", "baz_fn", "foo"], "data": ["huggingface"], "template": ["empty", "qwen2vl"],
                   "mm_plugin": ["base", "qwen2_vl"], "collator": ["qwen3vl"]}
    foo = next(m for m in result.data["model_ids"] if m["id"] == "foo")
    assert foo["file"] == "mindspeed_mm/fsdp/models/foo/modeling_foo.py" and foo["bases"] == ["FooPreTrainedModel"]
    examples = {e["file"]: e for e in result.data["examples"]}
    assert "examples/legacy/fsdp2_config.yaml" not in examples  # bridge-route config: not a plugin-route YAML
    ex = examples["examples/foo/foo_config.yaml"]
    assert ex["model_id"] == "foo" and ex["dataset_type"] == "huggingface" and ex["template"] == "qwen2vl"
    assert ex["collator_id"] == "qwen3vl" and ex["apply_modules"] == ["model.visual.blocks.{*}", "lm_head"]
    assert ex["plugin"] == ["mindspeed_mm/fsdp/models/foo", "mindspeed_mm/fsdp/data/datasets/huggingface"]
    assert ex["route"] == "plugin" and ex["scripts"][0]["file"] == "examples/foo/finetune_foo.sh"
    assert "duplicate anchor" in examples["examples/broken/broken_config.yaml"]["parse_error"]
    assert result.data["headline"].startswith("found 3 model ids, 1 dataset types, 2 templates")


def test_target_inventory_refuses_non_checkout(tmp_path: Path):
    assert not target_inventory(tmp_path).ok


def test_tools_bind_to_run_and_describe_fields(mm: Path, tmp_path: Path):
    ctx = RunContext(run_id="r", run_dir=tmp_path, source=tmp_path, target=mm, model_name="foo")
    tools = {t.name: t for t in repo_reader_tools(ctx)}
    assert set(tools) == {"repo_tree", "read_file", "grep", "python_outline", "hf_model_summary", "target_inventory"}
    for t in tools.values():
        for name, field in t.args_schema.model_fields.items():
            assert field.description, (t.name, name)
    out = tools["grep"].invoke({"pattern": "model_id: foo", "glob": "*.yaml"})
    assert "examples/foo/foo_config.yaml:15" in out
    assert '"ok": false' in tools["read_file"].invoke({"path": "../../etc/passwd"})
    assert '"found 3 model ids' in tools["target_inventory"].invoke({})


def test_outline_large_file_lists_names_and_class_filter_gives_detail(mm: Path):
    compact = outline(mm, "mindspeed_mm/fsdp/models/foo/modeling_foo.py", max_chars=10)
    cls = next(c for c in compact.data["classes"] if c["name"] == "FooForConditionalGeneration")
    assert cls["methods"] == ["forward:10", "overwrite_transformer_config:14"]
    assert "class_name" in compact.data["detail"]
    one = outline(mm, "mindspeed_mm/fsdp/models/foo/modeling_foo.py", class_name="FooForConditionalGeneration")
    assert [c["name"] for c in one.data["classes"]] == ["FooForConditionalGeneration"]
    assert one.data["classes"][0]["methods"][0]["signature"].startswith("forward(self, input_ids=None")
    assert [r["id"] for r in one.data["registrations"]] == ["foo"]
    missing = outline(mm, "mindspeed_mm/fsdp/models/foo/modeling_foo.py", class_name="Nope")
    assert not missing.ok and "FooPreTrainedModel" in missing.data["classes"]


def test_inventory_views(mm: Path):
    from msmigrate.tools.repo_reader.target_inventory import inventory_view

    full = target_inventory(mm)
    overview = inventory_view(full)
    assert set(overview.data["examples"][0]) <= {"file", "model_id", "dataset_type", "template", "collator_id",
                                                 "collator_model_name", "route", "parse_error"}
    templates = inventory_view(full, "templates", "QWEN2_VL")
    assert [e["id"] for e in templates.data["entries"]] == ["qwen2vl"]
    assert not inventory_view(full, "nonsense").ok
