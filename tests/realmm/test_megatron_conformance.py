"""The Megatron-route stand-in (msmigrate/testbeds/megatron_standin) against the real snapshot, AST only: nothing
of the real code is imported or run here (test_megatron_real.py runs the real converter). Every contract point the
stand-in imitates is checked, so the two cannot drift apart; where they differ the real one is right.

Points: file paths; entry-point and component signatures (positional order and names; extra real parameters need
defaults); forward_step's ``(output_tensor, loss_func)`` return and the ``pretrain(...)`` call; registry names,
files, keys, values and roles; converter constants, operator API and the mm-convert script; the example model
JSON's, data JSON's and launch script's fields and flags (each a subset of what the real pretrain_vlm.py examples
use); the model ids it names are registered in the real target."""

from __future__ import annotations

import ast
import json
import re
import warnings
from pathlib import Path

import pytest

import msmigrate.testbeds.megatron_standin as standin_pkg
from msmigrate.testbeds.megatron_standin import EXAMPLE
from msmigrate.tools.megatron.launch_script import parse_launch_script
from msmigrate.tools.megatron.registry import read_registry

pytestmark = pytest.mark.realmm

STANDIN = Path(standin_pkg.__file__).parent / "tree"
# Files the stand-in has and the real snapshots do not, each with the reason it may.
STANDIN_ONLY = {
    "megatron/": "Megatron-LM is installed next to the real route, not part of MindSpeed-MM or MindSpeed",
    "mindspeed_mm/models/common/standin_layers.py": "the stand-in's one layer type (the real route builds layers "
                                                    "from megatron.core ModuleSpecs)",
    "examples/qwen2.5vl/model_tiny.json": "the stand-in's tiny example model JSON",
    "examples/qwen2.5vl/data_tiny.json": "the stand-in's tiny example data JSON (tokenized rows)",
    "examples/qwen2.5vl/finetune_qwen2_5_vl_tiny.sh": "the stand-in's CPU launch script",
}
SIGNATURES = [
    ("pretrain_vlm.py", "model_provider"), ("pretrain_vlm.py", "get_batch"), ("pretrain_vlm.py", "loss_func"),
    ("pretrain_vlm.py", "forward_step"), ("pretrain_vlm.py", "train_valid_test_datasets_provider"),
    ("pretrain_vlm.py", "move_to_device"),
    ("mindspeed_mm/models/vlm_model.py", "VLMModel.__init__"), ("mindspeed_mm/models/vlm_model.py", "VLMModel.forward"),
    ("mindspeed_mm/models/vlm_model.py", "VLMModel.freeze"),
    ("mindspeed_mm/models/vlm_model.py", "VLMModel._build_image_encoder_model"),
    ("mindspeed_mm/models/vlm_model.py", "VLMModel._build_text_decoder_model"),
    ("mindspeed_mm/models/vision/vision_model.py", "VisionModel.__init__"),
    ("mindspeed_mm/models/vision/vision_model.py", "VisionModel.forward"),
    ("mindspeed_mm/models/vision/vision_model.py", "VisionModel.freeze"),
    ("mindspeed_mm/models/vision/vision_encoders/qwen2vl_vit_model.py", "Qwen2VLViT.__init__"),
    ("mindspeed_mm/models/vision/projectors/multimodal_projector.py", "MultimodalProjector.__init__"),
    ("mindspeed_mm/models/common/mm_gpt_model.py", "MMGPTModel.__init__"),
    ("mindspeed_mm/models/common/module_spec/get_layer_spec.py", "get_vit_layer_spec"),
    ("mindspeed_mm/models/common/module_spec/get_layer_spec.py", "get_llm_layer_spec"),
    ("mindspeed_mm/models/common/module_spec/get_layer_spec.py", "get_projector_layer_spec"),
    ("mindspeed_mm/utils/transformer_model_config.py", "get_model_config"),
    ("mindspeed_mm/configs/config.py", "mm_extra_args_provider"), ("mindspeed_mm/configs/config.py", "_add_mm_args"),
    ("mindspeed_mm/configs/config.py", "ConfigReader.__init__"), ("mindspeed_mm/configs/config.py", "MMConfig.__init__"),
    ("mindspeed_mm/data/__init__.py", "build_mm_dataset"), ("mindspeed_mm/data/__init__.py", "build_mm_dataloader"),
    ("mindspeed_mm/data/data_utils/utils.py", "build_iterations"),
    ("mindspeed_mm/training.py", "pretrain"),
    ("mindspeed/args_utils.py", "get_mindspeed_args"),
    ("checkpoint/common/converter.py", "Converter.hf_to_mm"), ("checkpoint/common/converter.py", "Converter.mm_to_hf"),
    ("checkpoint/common/converter.py", "Converter.resplit"),
    ("checkpoint/vlm_model/operator.py", "RenameOp.__init__"), ("checkpoint/vlm_model/operator.py", "MergeOp.__init__"),
    ("checkpoint/vlm_model/operator.py", "QKVMergeOp.__init__"),
    ("checkpoint/vlm_model/operator.py", "RelocateOp.__init__"),
    ("checkpoint/vlm_model/operator.py", "Operator.apply"), ("checkpoint/vlm_model/operator.py", "Operator.revert"),
    # the TP splitters: the same names and static split(tp_size, value) / merge(tp_values) API as the real ones
    *(("checkpoint/vlm_model/operator.py", f"{c}.{m}") for c in ("BaseSplit", "RowSplit", "ColSplit", "GLUSplit")
      for m in ("split", "merge")),
    ("checkpoint/vlm_model/converters/qwen2_5vl.py", "Qwen2_5_VLConverter.hf_to_mm"),
    ("checkpoint/vlm_model/converters/qwen2_5vl.py", "Qwen2_5_VLConverter.mm_to_hf"),
    ("checkpoint/convert_cli.py", "main"),
]
REGISTRIES = [("mindspeed_mm/models/vision/vision_model.py", "VISION_ENCODER_MAPPINGS"),
              ("mindspeed_mm/models/vision/vision_model.py", "VISION_PROJECTION_MAPPINGS"),
              ("mindspeed_mm/models/common/module_spec/get_layer_spec.py", "vit_layer_specs"),
              ("mindspeed_mm/models/common/module_spec/get_layer_spec.py", "llm_layer_specs"),
              ("mindspeed_mm/models/common/module_spec/get_layer_spec.py", "projector_layer_specs")]


def real_file(root: Path, rel: str) -> Path | None:
    for base in (root / "MindSpeed-MM", root / "MindSpeed"):
        if (base / rel).is_file():
            return base / rel
    return None


def _parse(path: Path) -> ast.Module:
    with warnings.catch_warnings():  # old escape sequences in the framework's files are not ours to report
        warnings.simplefilter("ignore")
        return ast.parse(path.read_text(encoding="utf-8"))


def definitions(path: Path) -> dict[str, ast.AST]:
    out: dict[str, ast.AST] = {}
    for node in _parse(path).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[node.name] = node
        if isinstance(node, ast.ClassDef):
            out.update({f"{node.name}.{s.name}": s for s in node.body if isinstance(s, ast.FunctionDef)})
    return out


def parameters(fn: ast.FunctionDef) -> list[tuple[str, bool]]:
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = [False] * (len(positional) - len(a.defaults)) + [True] * len(a.defaults)
    out = list(zip([p.arg for p in positional], defaults))
    out += [(p.arg, d is not None) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    return [(n, d) for n, d in out if n not in ("self", "cls")]


def standin_files() -> list[str]:
    return sorted(str(p.relative_to(STANDIN)) for p in STANDIN.rglob("*") if p.is_file()
                  and "__pycache__" not in p.parts)


def test_every_standin_file_exists_in_the_real_snapshot(realmm_snapshot):
    missing = [rel for rel in standin_files() if not rel.endswith("__init__.py")
               and not any(rel == k or (k.endswith("/") and rel.startswith(k)) for k in STANDIN_ONLY)
               and real_file(realmm_snapshot, rel) is None]
    assert not missing, f"stand-in files without a real counterpart: {missing}"
    stale = [k for k in STANDIN_ONLY if not k.endswith("/") and real_file(realmm_snapshot, k) is not None]
    assert not stale, f"STANDIN_ONLY entries that do exist in the real snapshot: {stale}"
    assert not (realmm_snapshot / "MindSpeed-MM" / "megatron").exists()  # Megatron-LM really is outside


@pytest.mark.parametrize("rel,qualname", SIGNATURES, ids=[f"{Path(r).stem}:{q}" for r, q in SIGNATURES])
def test_signature_matches(realmm_snapshot, rel, qualname):
    real_path = real_file(realmm_snapshot, rel)
    assert real_path is not None, f"{rel} is not in the real snapshot"
    real, stand = definitions(real_path).get(qualname), definitions(STANDIN / rel).get(qualname)
    assert real is not None and stand is not None, f"{qualname}: real {real is not None}, stand-in {stand is not None}"
    rp, sp = parameters(real), parameters(stand)
    assert [n for n, _ in sp] == [n for n, _ in rp[:len(sp)]], f"{qualname}: stand-in {sp} vs real {rp}"
    assert not [n for n, d in rp[len(sp):] if not d], f"{qualname}: the real one requires more (stand-in {sp})"
    assert not {n for n, d in sp if d} & {n for n, d in rp if not d}, f"{qualname}: optional here, required there"


def _returns(fn: ast.FunctionDef) -> list[str]:
    return [ast.unparse(n.value) for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]


def test_forward_step_returns_output_and_loss_func(realmm_snapshot):
    for path in (real_file(realmm_snapshot, "pretrain_vlm.py"), STANDIN / "pretrain_vlm.py"):
        rets = _returns(definitions(path)["forward_step"])
        assert rets and all(re.fullmatch(r"\(?\w+, loss_func\)?", r) for r in rets), (path, rets)


def _pretrain_call(path: Path) -> tuple[list[str], dict[str, str]]:
    tree = _parse(path)
    main = next(n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test))
    call = next(n for n in ast.walk(main) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "pretrain")
    return [ast.unparse(a) for a in call.args], {k.arg: ast.unparse(k.value) for k in call.keywords}


def test_main_calls_pretrain_the_same_way(realmm_snapshot):
    assert _pretrain_call(STANDIN / "pretrain_vlm.py") == _pretrain_call(real_file(realmm_snapshot, "pretrain_vlm.py"))


def _table(path: Path, name: str) -> dict[str, str]:
    for node in _parse(path).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name:
            return {k.value: ast.unparse(v) for k, v in zip(node.value.keys, node.value.values)}
    return {}


@pytest.mark.parametrize("rel,name", REGISTRIES, ids=[n for _, n in REGISTRIES])
def test_registry_tables_match(realmm_snapshot, rel, name):
    real, stand = _table(real_file(realmm_snapshot, rel), name), _table(STANDIN / rel, name)
    assert real and stand, f"{name}: real {len(real)} entries, stand-in {len(stand)}"
    assert set(stand) <= set(real), f"{name}: ids the real one lacks: {sorted(set(stand) - set(real))}"
    assert {k: stand[k] for k in stand} == {k: real[k] for k in stand}, f"{name}: values differ"


def test_registry_roles_match(realmm_snapshot):
    real = {r.name: r for r in read_registry(realmm_snapshot / "MindSpeed-MM").registries}
    for reg in read_registry(STANDIN).registries:
        assert reg.name in real, reg.name
        assert (reg.role, reg.lookup, reg.file) == (real[reg.name].role, real[reg.name].lookup,
                                                    real[reg.name].file), reg.name


def _constants(path: Path) -> dict[str, object]:
    return {n.targets[0].id: n.value.value for n in _parse(path).body
            if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Constant)}


def test_converter_constants_and_cli_entry(realmm_snapshot):
    real = _constants(real_file(realmm_snapshot, "checkpoint/common/constant.py"))
    stand = _constants(STANDIN / "checkpoint/common/constant.py")
    assert stand and all(real.get(k) == v for k, v in stand.items()), (stand, real)
    pattern = re.compile(r'^mm-convert\s*=\s*"([^"]+)"', re.M)
    assert pattern.findall((STANDIN / "pyproject.toml").read_text()) == pattern.findall(
        (realmm_snapshot / "MindSpeed-MM" / "pyproject.toml").read_text())
    # concrete converters register themselves: Commandable.subclasses filled in __init_subclass__
    for path in (real_file(realmm_snapshot, "checkpoint/common/converter.py"), STANDIN / "checkpoint/common/converter.py"):
        assert {"Commandable", "Converter", "Commandable.__init_subclass__"} <= set(definitions(path)), path


def _real_vlm_examples(root: Path) -> tuple[list[Path], list[dict], list[dict]]:
    """The real pretrain_vlm.py launch scripts and the model / data JSONs they pass."""
    mm = root / "MindSpeed-MM"
    scripts, models, datas = [], [], []
    for sh in sorted((mm / "examples").rglob("*.sh")):
        launch = parse_launch_script(sh.read_text(errors="replace"))
        if launch.entry != "pretrain_vlm.py":
            continue
        scripts.append(sh)
        for flag, bucket in (("--mm-model", models), ("--mm-data", datas)):
            path = launch.flags.get(flag)
            if isinstance(path, str) and (mm / path).is_file():
                bucket.append(json.loads((mm / path).read_text()))
    return scripts, models, datas


def _keys(obj: dict, prefix: str = "") -> set[str]:
    out = set()
    for k, v in obj.items():
        out.add(prefix + k)
        if isinstance(v, dict):
            out |= _keys(v, prefix + k + ".")
    return out


def test_example_json_fields_are_real_fields(realmm_snapshot):
    _, models, datas = _real_vlm_examples(realmm_snapshot)
    assert len(models) >= 4 and len(datas) >= 4
    for name, real_objs in ((EXAMPLE["model_json"], models), (EXAMPLE["data_json"], datas)):
        ours = _keys(json.loads((STANDIN / name).read_text()))
        real = set().union(*(_keys(o) for o in real_objs))
        assert ours <= real, f"{name}: fields no real pretrain_vlm example uses: {sorted(ours - real)}"


def test_example_model_ids_are_registered_in_the_real_target(realmm_snapshot):
    real = read_registry(realmm_snapshot / "MindSpeed-MM")
    model = json.loads((STANDIN / EXAMPLE["model_json"]).read_text())
    for role, sub in (("vision_encoder", model["image_encoder"]["vision_encoder"]),
                      ("vision_projector", model["image_encoder"]["vision_projector"]),
                      ("text_decoder", model["text_decoder"])):
        assert sub["model_id"] in real.ids_for(role), (role, sub["model_id"])


def test_example_script_flags_are_real_flags(realmm_snapshot):
    scripts, _, _ = _real_vlm_examples(realmm_snapshot)
    real_flags, real_launcher = set(), set()
    for sh in scripts:
        launch = parse_launch_script(sh.read_text(errors="replace"))
        real_flags |= set(launch.flags)
        real_launcher |= set(launch.launcher_args)
    ours = parse_launch_script((STANDIN / EXAMPLE["script"]).read_text())
    assert ours.entry == "pretrain_vlm.py" and not ours.unresolved
    assert set(ours.flags) <= real_flags, sorted(set(ours.flags) - real_flags)
    assert set(ours.launcher_args) <= real_launcher, sorted(set(ours.launcher_args) - real_launcher)
    assert {"--mm-data", "--mm-model", "--mm-tool"} <= set(ours.flags)


def test_converter_is_found_for_the_same_architecture(realmm_snapshot):
    from msmigrate.tools.megatron.converters import converter_candidates

    real = converter_candidates(realmm_snapshot / "MindSpeed-MM", "qwen2_5_vl")
    stand = converter_candidates(STANDIN, "qwen2_5_vl")
    assert real.best == stand.best == EXAMPLE["converter"]
    assert real.matches[0].file == stand.matches[0].file
