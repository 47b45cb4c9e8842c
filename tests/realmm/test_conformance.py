"""The stand-in target imitates the real MindSpeed-MM's plugin-route contract; this test reads the real snapshot's
code (AST only: nothing of it is imported or run) and checks every contract point the stand-in imitates, so the two
cannot drift apart again. Where they differ, the real one is right: fix the stand-in, not this test.

Points: paths of the stand-in's framework files, the registry API, plugin-facing signatures (positional order and
names; extra real parameters must have defaults), error texts, YAML sections and fields (the argument models), and
the per-iteration log line."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import msmigrate.testbeds.standin as standin_pkg

STANDIN = Path(standin_pkg.__file__).parent / "tree"

# Files the stand-in has and the real framework does not, each with the reason it may.
STANDIN_ONLY = {
    "mindspeed_mm/fsdp/models/qwen3vl/modeling_qwen3vl.py": "the stand-in's own small pre-existing model (the real "
                                                            "folder holds modeling_qwen3_vl_moe.py)",
    "mindspeed_mm/fsdp/models/tiny_custom_lm/modeling_tiny_custom_lm.py": "the stand-in's custom-path example model",
    "mindspeed_mm/fsdp/utils/random.py": "seeding helper of the stand-in trainer (internal, not plugin-facing)",
}
# Plugin-facing callables: what generated plugins, data code and msmigrate's probes call.
SIGNATURES = [
    ("mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py", "BasePlugin.process_messages"),
    ("mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py", "BasePlugin.process_token_ids"),
    ("mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py", "BasePlugin.get_mm_inputs"),
    ("mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py", "MMPluginMixin._validate_input"),
    ("mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py", "MMPluginMixin._validate_messages"),
    ("mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py", "MMPluginMixin._get_mm_inputs"),
    ("mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py", "MMPluginMixin._regularize_images"),
    ("mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py", "get_mm_plugin"),
    ("mindspeed_mm/fsdp/data/data_utils/func_utils/template.py", "_register_template"),
    ("mindspeed_mm/fsdp/data/dataloader/data_collator.py", "resolve_data_collator"),
    ("mindspeed_mm/fsdp/utils/register.py", "Register.register"),
    ("mindspeed_mm/fsdp/utils/register.py", "import_plugin"),
    ("mindspeed_mm/fsdp/distributed/parallel_state.py", "init_parallel_state"),
    ("mindspeed_mm/fsdp/distributed/parallel_state.py", "get_parallel_state"),
    ("mindspeed_mm/fsdp/models/modelhub.py", "ModelHub.build"),
    ("mindspeed_mm/fsdp/checkpoint/utils.py", "retie_embeddings"),  # model_parity's meta path calls it
    # the sharded-parity reference loads the run's HF folder with them; draft configs rely on the auto detection
    ("mindspeed_mm/fsdp/checkpoint/hf_utils.py", "load_hf_weights"),
    ("mindspeed_mm/fsdp/checkpoint/hf_utils.py", "looks_like_hf_weight_dir"),
    ("mindspeed_mm/fsdp/data/__init__.py", "build_mm_dataset"),
    ("mindspeed_mm/fsdp/data/__init__.py", "build_mm_dataloader"),
    ("mindspeed/fsdp/utils/log.py", "print_rank"),
    ("mindspeed/fsdp/utils/str_match.py", "module_name_match"),
]
# Messages the stand-in raises on behalf of a library the real code calls, not of MindSpeed-MM itself.
LIBRARY_TEXTS = {"Unable to find '": "datasets.load_dataset (the real huggingface dataset calls it)"}

pytestmark = pytest.mark.realmm


def real_file(root: Path, rel: str) -> Path | None:
    for base in (root / "MindSpeed-MM", root / "MindSpeed"):
        if (base / rel).is_file():
            return base / rel
    return None


def definitions(path: Path) -> dict[str, ast.AST]:
    """Top-level functions and classes, and methods as ``Class.method``."""
    out: dict[str, ast.AST] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = node
        if isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out[f"{node.name}.{sub.name}"] = sub
    return out


def parameters(fn: ast.FunctionDef) -> list[tuple[str, bool]]:
    """(name, has_default) of the named parameters, self/cls left out."""
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = [False] * (len(positional) - len(a.defaults)) + [True] * len(a.defaults)
    out = list(zip([p.arg for p in positional], defaults))
    out += [(p.arg, d is not None) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    return [(n, d) for n, d in out if n not in ("self", "cls")]


def standin_files() -> list[str]:
    return sorted(str(p.relative_to(STANDIN)) for p in STANDIN.rglob("*.py")
                  if p.relative_to(STANDIN).parts[0] in ("mindspeed_mm", "mindspeed"))


def test_every_standin_framework_file_exists_in_the_real_snapshot(realmm_snapshot):
    missing = [rel for rel in standin_files() if not rel.endswith("__init__.py") and rel not in STANDIN_ONLY
               and real_file(realmm_snapshot, rel) is None]
    assert not missing, f"stand-in files without a real counterpart: {missing}"
    stale = [rel for rel in STANDIN_ONLY if real_file(realmm_snapshot, rel) is not None]
    assert not stale, f"STANDIN_ONLY entries that do exist in the real snapshot: {stale}"


def test_registry_api_matches(realmm_snapshot):
    rel = "mindspeed_mm/fsdp/utils/register.py"
    real_src = real_file(realmm_snapshot, rel).read_text()
    stand_src = (STANDIN / rel).read_text()
    for name in ("model_register", "data_register"):
        assert re.search(rf"^{name}\s*=\s*Register\(", real_src, re.M), name
        assert re.search(rf"^{name}\s*=\s*Register\(", stand_src, re.M), name
    real_defs, stand_defs = definitions(real_file(realmm_snapshot, rel)), definitions(STANDIN / rel)
    public = {n for n in real_defs if n.startswith("Register.") and not n.split(".")[1].startswith("__")}
    assert public <= set(stand_defs), f"Register methods missing from the stand-in: {sorted(public - set(stand_defs))}"
    # probes read the id table as Register()._registry
    assert "self._registry" in real_src and "self._registry" in stand_src


@pytest.mark.parametrize("rel,qualname", SIGNATURES, ids=[q for _, q in SIGNATURES])
def test_plugin_facing_signature_matches(realmm_snapshot, rel, qualname):
    real_path = real_file(realmm_snapshot, rel)
    assert real_path is not None, f"{rel} is not in the real snapshot"
    real, stand = definitions(real_path).get(qualname), definitions(STANDIN / rel).get(qualname)
    assert real is not None, f"{qualname} is not defined in the real {rel}"
    assert stand is not None, f"{qualname} is not defined in the stand-in {rel}"
    rp, sp = parameters(real), parameters(stand)
    assert [n for n, _ in sp] == [n for n, _ in rp[:len(sp)]], f"{qualname}: stand-in {sp} vs real {rp}"
    required_extra = [n for n, d in rp[len(sp):] if not d]
    assert not required_extra, f"{qualname}: the real one also requires {required_extra} (stand-in {sp})"
    optional_in_standin = {n for n, d in sp if d}
    required_in_real = {n for n, d in rp if not d}
    assert not optional_in_standin & required_in_real, f"{qualname}: optional in the stand-in, required in the real"


def _raise_patterns(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            arg = node.exc.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                out.append([arg.value])
            elif isinstance(arg, ast.JoinedStr):
                out.append([v.value for v in arg.values if isinstance(v, ast.Constant)])
    return [[c for c in chunks if len(c.strip()) > 6] for chunks in out]


def _real_strings(root: Path) -> str:
    texts = []
    for base in (root / "MindSpeed-MM" / "mindspeed_mm", root / "MindSpeed" / "mindspeed"):
        for path in base.rglob("*.py"):
            try:
                tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    texts.append(node.value)
    return "\n".join(texts)


def test_error_texts_are_the_real_ones(realmm_snapshot):
    real = _real_strings(realmm_snapshot)
    wrong = []
    for rel in standin_files():
        for chunks in _raise_patterns(STANDIN / rel):
            if any(chunk.startswith(lib) for chunk in chunks for lib in LIBRARY_TEXTS):
                continue
            if any(chunk not in real for chunk in chunks):
                wrong.append(f"{rel}: {' … '.join(chunks)}")
    assert not wrong, "stand-in error texts the real framework never raises:\n" + "\n".join(wrong)


def _fields(path: Path) -> dict[str, set[str]]:
    """Argument-model class -> its annotated field names."""
    out = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef):
            out[node.name] = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign)
                              and isinstance(s.target, ast.Name)}
    return out


def test_yaml_sections_and_fields_are_real(realmm_snapshot):
    params = "mindspeed_mm/fsdp/params"
    real_root = _fields(real_file(realmm_snapshot, f"{params}/argument.py"))["Arguments"]
    stand_root = _fields(STANDIN / params / "argument.py")["Arguments"]
    assert stand_root == real_root, f"YAML sections: stand-in {sorted(stand_root)} vs real {sorted(real_root)}"
    invented = []
    for path in sorted((STANDIN / params).glob("*.py")):
        real_path = real_file(realmm_snapshot, f"{params}/{path.name}")
        if real_path is None:
            continue
        real = _fields(real_path)
        for cls, names in _fields(path).items():
            if cls in real:
                invented += [f"{path.name}:{cls}.{n}" for n in sorted(names - real[cls])]
    assert not invented, f"argument fields the real framework does not have: {invented}"


def _log_pieces(path: Path) -> list[str]:
    fn = definitions(path)["TrainEngine.training_log"]
    return [n.value.strip() for n in ast.walk(fn) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and ("|" in n.value or "iteration" in n.value)]


def test_iteration_log_line_is_the_real_format(realmm_snapshot):
    rel = "mindspeed_mm/fsdp/train/train_engine.py"
    real, stand = _log_pieces(real_file(realmm_snapshot, rel)), _log_pieces(STANDIN / rel)
    assert stand and set(stand) <= set(real), f"stand-in log pieces {stand} not in the real {real}"
    assert [p for p in real if p.startswith("iteration")] == [p for p in stand if p.startswith("iteration")]


def test_the_real_trainer_keeps_buffers_through_its_storage_call(realmm_snapshot):
    """What the model prompt tells a plugin about non-persistent buffers rests on this reading of the real trainer:
    ``to_empty_if_needed`` (new storage for parameters only), ``init_weights`` only without ``training.load``."""
    from msmigrate.tools.repo_reader.trainer_facts import meta_init_facts

    facts = meta_init_facts(realmm_snapshot / "MindSpeed-MM")
    assert facts["storage"] == "to_empty_if_needed" and facts["buffers_kept"] is True
    assert facts["init_weights"] == "only without training.load"
    # the stand-in imitates it (it used to call Module.to_empty, emptying buffers too)
    stand = meta_init_facts(STANDIN)
    assert {k: stand[k] for k in ("storage", "buffers_kept", "init_weights", "defined_in")} == \
        {k: facts[k] for k in ("storage", "buffers_kept", "init_weights", "defined_in")}


def test_the_real_engine_sets_the_loss_and_the_real_dataloader_prefers_collate_fn(realmm_snapshot):
    """The model contract's loss line and branch C's batching line rest on this reading of the real code: the train
    engine assigns ``model.loss_function`` from ``features.loss_cfg.loss_type``, and the sampler dataloader uses a
    dataset's own ``collate_fn`` instead of the collator."""
    from msmigrate.tools.repo_reader.wiring_facts import collate_wiring_facts, loss_wiring_facts

    root = realmm_snapshot / "MindSpeed-MM"
    loss = loss_wiring_facts(root)
    assert loss["key"] == "features.loss_cfg.loss_type" and loss["set_at"].startswith("mindspeed_mm/fsdp/train/")
    collate = collate_wiring_facts(root)
    assert collate["dataset_collate_fn_wins"] is True and collate["at"].startswith("mindspeed_mm/fsdp/data/")


def test_the_data_doc_renders_the_real_dataloaders_batching(realmm_snapshot):
    """The plugin-route-data doc's branch-C line, filled from the real snapshot's dataloader: it prefers a dataset's
    own ``collate_fn``, so the doc (like the data prompt) says to give the dataset none and names the real line."""
    from msmigrate.agent.knowledge_view import fill_target_slots
    from msmigrate.knowledge.retrieval import read_knowledge
    from msmigrate.tools.repo_reader.wiring_facts import collate_wiring_facts

    root = realmm_snapshot / "MindSpeed-MM"
    body = fill_target_slots(read_knowledge("plugin-route-data").data["body"], root)
    line = " ".join(body.split("**C — new dataset plugin:**")[1].split("\n\n")[0].split())
    facts = collate_wiring_facts(root)
    assert facts["dataset_collate_fn_wins"] is True and facts["at"].startswith("mindspeed_mm/fsdp/data/")
    assert "give the dataset no `collate_fn`" in line and f"`{facts['at']}`" in line and "[[target:" not in line
