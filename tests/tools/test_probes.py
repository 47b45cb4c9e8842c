"""Probes run through runtime.run_probe on models built in-test from tiny configs, and a tmp plugin tree whose
register module mirrors the real attribute names (``model_register`` / ``data_register`` holding ``_registry``).

Every probe test runs twice: in a forked child of the warm runtime and as a fresh process; the results must be the
same (the assertions are the same)."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from msmigrate.tools.runtime import PROBES_DIR, run_probe
from msmigrate.tools.warm_runtime import SWITCH_ENV

DATA = Path(__file__).resolve().parents[1] / "data"
PY = os.environ.get("MSMIGRATE_PROBE_TEST_PYTHON", sys.executable)  # e.g. the real runtime (torch 2.7.1)


def _standin_register() -> str:
    """The stand-in's ``Register`` class and its two registries, without the rest of its module (which imports
    mindspeed): the toy target below needs only the registry, and takes it from the stand-in instead of a copy."""
    from msmigrate.testbeds.standin import __file__ as standin_init

    source = (Path(standin_init).parent / "tree/mindspeed_mm/fsdp/utils/register.py").read_text()
    tree = ast.parse(source)
    keep = [n for n in tree.body if (isinstance(n, ast.ClassDef) and n.name == "Register")
            or (isinstance(n, ast.Assign) and any(getattr(t, "id", "").endswith("_register") for t in n.targets))]
    return "\n\n".join(ast.get_source_segment(source, n) for n in keep) + "\n"


REGISTER = _standin_register()


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


@pytest.fixture(scope="module")
def tiny_qwen2vl(tmp_path_factory) -> Path:
    from transformers import Qwen2VLConfig

    dest = tmp_path_factory.mktemp("qwen2vl")
    text = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2,
                num_key_value_heads=1, vocab_size=256, bos_token_id=1, eos_token_id=2, pad_token_id=0,
                rope_scaling={"type": "mrope", "mrope_section": [4, 2, 2]})
    vision = dict(depth=3, embed_dim=16, hidden_size=32, num_heads=2, patch_size=14, spatial_merge_size=2,
                  temporal_patch_size=2)
    Qwen2VLConfig(text_config=text, vision_config=vision, architectures=["Qwen2VLForConditionalGeneration"],
                  image_token_id=250, video_token_id=251, vision_start_token_id=252).save_pretrained(dest)
    return dest


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("target")
    _write(root, {
        "mindspeed_mm/__init__.py": "",
        "mindspeed_mm/fsdp/__init__.py": "",
        "mindspeed_mm/fsdp/utils/__init__.py": "",
        "mindspeed_mm/fsdp/utils/register.py": REGISTER,
        "mindspeed_mm/fsdp/models/__init__.py": "",
        # a model plugin (package) with a sub-package whose __init__ raises ImportError: walk_packages skips it
        "mindspeed_mm/fsdp/models/toy/__init__.py": "",
        "mindspeed_mm/fsdp/models/toy/modeling_toy.py": """
            from mindspeed_mm.fsdp.utils.register import model_register

            @model_register.register("toy")
            class ToyModel:
                pass
        """,
        "mindspeed_mm/fsdp/models/toy/extra/__init__.py": "import not_installed_dependency_xyz\n",
        "mindspeed_mm/fsdp/models/toy/extra/modeling_extra.py": """
            from mindspeed_mm.fsdp.utils.register import model_register

            @model_register.register("toy_extra")
            class ToyExtra:
                pass
        """,
        "mindspeed_mm/fsdp/data/__init__.py": "",
        "mindspeed_mm/fsdp/data/toy_data/__init__.py": "",
        "mindspeed_mm/fsdp/data/toy_data/dataset.py": """
            from mindspeed_mm.fsdp.utils.register import data_register

            @data_register.register("toy_data")
            def build_toy(args):
                return []
        """,
        # a plugin whose sub-package raises something other than ImportError: the trainer would crash
        "mindspeed_mm/fsdp/models/crashy/__init__.py": "",
        "mindspeed_mm/fsdp/models/crashy/sub/__init__.py": "raise RuntimeError('needs the YAML as argv[1]')\n",
        # transformers-path plugin class (subclass of an HF class) and a custom-path class (ModelArguments in)
        "mindspeed_mm/fsdp/models/tinyvl/__init__.py": "",
        "mindspeed_mm/fsdp/models/tinyvl/modeling_tinyvl.py": """
            import torch
            from transformers import Qwen2VLForConditionalGeneration
            from mindspeed_mm.fsdp.utils.register import model_register

            @model_register.register("tiny_vl")
            class TinyVL(Qwen2VLForConditionalGeneration):
                pass

            class Block(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.proj = torch.nn.Linear(8, 8)

                def forward(self, x, past_key_values=None):
                    return self.proj(x)

            class ClassEmbedding(torch.nn.Module):  # a vendored module with a bare nn.Parameter
                def __init__(self, width):
                    super().__init__()
                    self.class_embedding = torch.nn.Parameter(torch.randn(width))

            @model_register.register("tiny_vl_init_skips_marked")
            class TinyVLInitSkipsMarked(Qwen2VLForConditionalGeneration):
                # blind live run 10's init_weights override: after the inherited init_weights (which marks every
                # module _is_hf_initialized) it skips marked modules, so the bare parameter is never written
                accepts_loss_kwargs = False

                def __init__(self, config):
                    super().__init__(config)
                    self.extra = ClassEmbedding(config.text_config.hidden_size)

                def to_empty(self, *, device, recurse=True):  # rotary buffers back before a resumed load
                    module = super().to_empty(device=device, recurse=recurse)
                    self.init_weights()
                    return module

                def _init_extra(self, module):
                    module.class_embedding.normal_(mean=0.0, std=0.02)

                def init_weights(self):
                    super().init_weights()
                    with torch.no_grad():
                        for module in self.modules():
                            if getattr(module, "_is_hf_initialized", False):
                                continue
                            if isinstance(module, ClassEmbedding):
                                self._init_extra(module)

                def forward(self, input_ids=None, labels=None, **kwargs):
                    out = super().forward(input_ids=input_ids, labels=labels, **kwargs)
                    out.loss = out.loss + 0.0 * self.extra.class_embedding.sum()
                    return out

            @model_register.register("tiny_vl_init_covers_all")
            class TinyVLInitCoversAll(TinyVLInitSkipsMarked):
                def init_weights(self):
                    super(TinyVLInitSkipsMarked, self).init_weights()
                    with torch.no_grad():
                        for module in self.modules():
                            if isinstance(module, ClassEmbedding):
                                self._init_extra(module)

            @model_register.register("tiny_custom")
            class TinyCustom(torch.nn.Module):
                def __init__(self, args):
                    super().__init__()
                    self.embed = torch.nn.Embedding(32, 8)
                    self.blocks = torch.nn.ModuleList([Block(), Block()])
                    self.head = torch.nn.Linear(8, 32)

                @classmethod
                def _from_config(cls, model_args):
                    return cls(model_args)

                def forward(self, input_ids, labels=None, **kwargs):
                    h = self.embed(input_ids)
                    for block in self.blocks:
                        h = block(h)
                    logits = self.head(h)
                    loss = torch.nn.functional.cross_entropy(logits.view(-1, 32), labels.view(-1))
                    return {"loss": loss, "logits": logits}  # a dict: the engine reads output.loss and fails
        """,
        # a rotary-style non-persistent buffer: restored only in init_weights (which a resumed load skips) in
        # the first, also recomputed in to_empty in the second
        "mindspeed_mm/fsdp/models/rotary/__init__.py": "",
        "mindspeed_mm/fsdp/models/rotary/modeling_rotary.py": """
            import types
            import torch
            from mindspeed_mm.fsdp.utils.register import model_register

            class Rotary(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("inv_freq", self.freqs(), persistent=False)

                @staticmethod
                def freqs():
                    return 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8))

            @model_register.register("rotary_init_weights_only")
            class RotaryLM(torch.nn.Module):
                def __init__(self, args):
                    super().__init__()
                    self.embed = torch.nn.Embedding(32, 8)
                    self.rotary = Rotary()
                    self.head = torch.nn.Linear(8, 32)

                @classmethod
                def _from_config(cls, model_args):
                    return cls(model_args)

                def init_weights(self):  # every parameter and the buffer: the fresh (no load) path passes
                    self.embed.reset_parameters()
                    self.head.reset_parameters()
                    with torch.no_grad():
                        self.rotary.inv_freq.copy_(Rotary.freqs())

                def forward(self, input_ids, labels=None, **kwargs):
                    h = self.embed(input_ids) * torch.cos(self.rotary.inv_freq).repeat(2)
                    logits = self.head(h)
                    loss = torch.nn.functional.cross_entropy(logits.view(-1, 32), labels.view(-1))
                    return types.SimpleNamespace(loss=loss, logits=logits)

            @model_register.register("rotary_to_empty")
            class RotaryLMFixed(RotaryLM):
                def to_empty(self, *, device, recurse=True):
                    module = super().to_empty(device=device, recurse=recurse)
                    self.init_weights()
                    return module
        """,
    })
    return root


@pytest.fixture(params=["warm", "cold"], autouse=True)
def runtime_mode(request, monkeypatch):
    monkeypatch.setenv(SWITCH_ENV, "1" if request.param == "warm" else "0")
    return request.param


def _probe(name, args, timeout=300):
    res = run_probe(PY, name, args, timeout=timeout)
    expected = "warm" if os.environ[SWITCH_ENV] == "1" else "cold"
    assert res.data["runtime_mode"] == expected, res.data.get("runtime_reason")
    return res, res.data.get("result", {})


def test_npu_smi_parser_reads_recorded_output():
    spec = importlib.util.spec_from_file_location("env_probe", PROBES_DIR / "env_probe.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    parsed = mod.parse_npu_smi((DATA / "npu_smi" / "npu_smi_info_910b_4.txt").read_text())
    assert parsed["version"] == "23.0.6"
    assert [(n["id"], n["health"], n["hbm_total_mb"]) for n in parsed["npus"]] == [
        (0, "OK", 65536), (1, "OK", 65536), (2, "OK", 65536), (3, "Warning", 65536)]
    assert mod.parse_npu_smi("command not found")["npus"] == []


def test_plugin_check_reports_silent_skips(target):
    res, out = _probe("plugin_check", ["--target", str(target), "--plugin", "mindspeed_mm/fsdp/models/toy",
                                       "--plugin", "mindspeed_mm.fsdp.data.toy_data", "--plugin",
                                       "mindspeed_mm/fsdp/models/typo"])
    assert res.ok, res.error
    assert out["new_model_ids"] == ["toy"] and out["new_data_ids"] == ["toy_data"]
    assert out["model_register"]["toy"] == "mindspeed_mm.fsdp.models.toy.modeling_toy.ToyModel"
    toy, data, typo = out["plugins"]
    (skip,) = toy["skipped_subpackages"]
    assert skip["package"] == "mindspeed_mm.fsdp.models.toy.extra" and skip["silently_skipped_by_trainer"]
    assert "not_installed_dependency_xyz" in skip["error"]
    assert toy["modules_imported"] == ["mindspeed_mm.fsdp.models.toy.modeling_toy"]
    assert data["imported"] and not data["skipped_subpackages"]
    assert typo["swallowed_by_trainer"] and typo["error"].startswith("ModuleNotFoundError")
    assert out["trainer_outcome"] == "swallowed_failure"


def test_plugin_check_flags_crash(target):
    res, out = _probe("plugin_check", ["--target", str(target), "--plugin", "mindspeed_mm/fsdp/models/crashy"])
    assert res.ok
    (skip,) = out["plugins"][0]["skipped_subpackages"]
    assert not skip["silently_skipped_by_trainer"] and "needs the YAML" in skip["error"]
    assert out["trainer_outcome"] == "crash"


def test_module_tree_hf_folder(tiny_qwen2vl):
    from transformers import Qwen2VLForConditionalGeneration
    from transformers.models.qwen2_vl import modeling_qwen2_vl as m

    res, out = _probe("module_tree", ["--model", str(tiny_qwen2vl), "--shrink-layers", "2"])
    assert res.ok, res.error
    assert out["names"][0] == "" and out["classes"][""] == "Qwen2VLForConditionalGeneration"
    layers = [n for n in out["names"] if n.startswith("model.language_model.layers.") and n.count(".") == 3]
    assert layers == ["model.language_model.layers.0", "model.language_model.layers.1"]  # shrunk from 3
    assert "model.visual.blocks.1" in out["names"] and "model.visual.blocks.2" not in out["names"]
    assert out["patterns"]["model.language_model.layers.{*}"] == 2
    assert out["patterns"]["model.language_model.layers.{*}.self_attn.q_proj"] == 2
    assert out["patterns"]["model.visual.merger.mlp.{*}"] == 3 and out["patterns"][""] == 1
    assert set(Qwen2VLForConditionalGeneration._no_split_modules) <= set(out["no_split_modules"])
    for cls_name in ("Qwen2VLDecoderLayer", "Linear"):
        cls = getattr(m, cls_name, None) or getattr(__import__("torch").nn, cls_name)
        params = inspect.signature(cls.forward).parameters
        expected = "past_key_values" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())
        assert out["accepts_past_key_values"][cls_name] is expected
    assert out["accepts_past_key_values"]["Linear"] is False
    # the sizes the report's FLOPs per token read: the shrunk model's own, counted from the built parameters
    import json as _json

    text = _json.loads((tiny_qwen2vl / "config.json").read_text()).get("text_config") or {}
    assert out["text_layers"] == 2 and out["text_hidden"] == (text.get("hidden_size") or out["text_hidden"])
    assert out["param_count"] > out["embedding_params"] > 0


def test_module_tree_reads_ties_from_the_built_model(tmp_path, tiny_qwen2vl):
    """transformers 4.x leaves tie_word_embeddings out of config.json when it equals the class default (Gemma 3
    ties); the tie is read from the built model, so a draft config does not give the shared weight two FSDP units."""
    from transformers import Gemma3TextConfig

    from msmigrate.agent.routes.fsdp2.draft_config import tied_embeddings

    Gemma3TextConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                     num_key_value_heads=1, head_dim=16, vocab_size=128,
                     architectures=["Gemma3ForCausalLM"]).save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg.pop("tie_word_embeddings", None)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    res, out = _probe("module_tree", ["--model", str(tmp_path)])
    assert res.ok, res.error
    assert out["tied_embeddings"] is True
    assert out["tied_parameters"] == [["model.embed_tokens.weight", "lm_head.weight"]]
    assert tied_embeddings(tmp_path) is False  # what config.json alone says
    assert tied_embeddings(tmp_path, out) is True
    res, out = _probe("module_tree", ["--model", str(tiny_qwen2vl), "--shrink-layers", "2"])
    assert res.ok and out["tied_embeddings"] is False and out["tied_parameters"] == []


def test_module_tree_registered_plugin_classes(target, tiny_qwen2vl):
    common = ["--target", str(target), "--plugin", "mindspeed_mm/fsdp/models/tinyvl"]
    res, out = _probe("module_tree", common + ["--model-id", "tiny_vl", "--model-name-or-path", str(tiny_qwen2vl)])
    assert res.ok, res.error
    assert out["build"] == "transformers" and out["model_class"].endswith("modeling_tinyvl.TinyVL")
    assert out["classes"][""] == "TinyVL" and "model.language_model.layers.2" in out["names"]
    res, out = _probe("module_tree", common + ["--model-id", "tiny_custom", "--model-name-or-path", "/nonexistent"])
    assert res.ok, res.error
    assert out["build"] == "custom" and out["names"] == ["", "embed", "blocks", "blocks.0", "blocks.0.proj",
                                                         "blocks.1", "blocks.1.proj", "head"]
    assert out["accepts_past_key_values"] == {"TinyCustom": True, "Embedding": False, "ModuleList": False,
                                              "Block": True, "Linear": False}
    res, out = _probe("module_tree", common + ["--model-id", "nope", "--model-name-or-path", str(tiny_qwen2vl)])
    assert not res.ok and "ID 'nope' is not registered." in res.error


def test_forward_smoke_hf_folder(tiny_qwen2vl, tmp_path):
    res, out = _probe("forward_smoke", ["--model", str(tiny_qwen2vl)])
    assert res.ok, res.error
    assert out["finite"] and out["has_loss_attr"] and out["loss"] > 0
    assert "labels" in out["forward_params"] and out["batch_keys"] == sorted(
        ["input_ids", "attention_mask", "labels"] + (["mm_token_type_ids"] if "mm_token_type_ids" in out["forward_params"] else []))
    batch = tmp_path / "batch.json"
    ids = [[5, 6, 7, 8, 9, 10]]
    batch.write_text(json.dumps({"input_ids": ids, "attention_mask": [[1] * 6], "labels": [[-100, -100, 7, 8, 9, 10]],
                                 "mm_token_type_ids": [[0] * 6]}))
    res2, out2 = _probe("forward_smoke", ["--model", str(tiny_qwen2vl), "--batch", str(batch)])
    assert res2.ok and out2["finite"] and out2["batch_keys"] == ["attention_mask", "input_ids", "labels",
                                                                  "mm_token_type_ids"]


def test_forward_smoke_synthetic_ids_come_from_the_text_models_vocabulary(tiny_qwen2vl, tmp_path):
    """A composite config whose top-level vocab_size is stale (bigger than the text model's embedding): the
    synthetic batch must draw its ids from get_text_config().vocab_size, or the embedding lookup goes out of range."""
    stale = tmp_path / "stale_vocab"
    shutil.copytree(tiny_qwen2vl, stale)
    cfg = json.loads((stale / "config.json").read_text())
    cfg["vocab_size"] = 151936  # the full model's figure left at the top level; the text model has 256
    (stale / "config.json").write_text(json.dumps(cfg))
    res, out = _probe("forward_smoke", ["--model", str(stale), "--seq-len", "64"])
    assert res.ok, res.error
    assert out["finite"] and out["loss"] > 0


def test_forward_smoke_meta_load_names_a_buffer_only_init_weights_restores(target):
    """The trainer's meta init + to_empty + load path (init_weights skipped): the buffer stays NaN and is named."""
    res, out = _probe("forward_smoke", ["--target", str(target), "--plugin", "mindspeed_mm/fsdp/models/rotary",
                                        "--model-id", "rotary_init_weights_only", "--model-name-or-path", "/nonexistent"])
    assert out["finite"]  # the eager build is fine: only the meta path shows the bug
    meta = out["meta_load"]
    assert meta["first_nonfinite"] == "rotary.inv_freq" and meta["finite"] is False
    assert meta["first_nonfinite_kind"] == "non-persistent buffer"
    assert out["meta_fresh"]["first_nonfinite"] is None and out["meta_fresh"]["finite"]  # init_weights restores it
    assert not res.ok and res.error.startswith("resumed load"), res.error
    assert "non-persistent buffer `rotary.inv_freq` is not finite" in res.error and "to_empty" in res.error


def test_forward_smoke_meta_load_passes_a_plugin_that_rebuilds_it_in_to_empty(target):
    res, out = _probe("forward_smoke", ["--target", str(target), "--plugin", "mindspeed_mm/fsdp/models/rotary",
                                        "--model-id", "rotary_to_empty", "--model-name-or-path", "/nonexistent"])
    assert res.ok, res.error
    meta = out["meta_load"]
    assert meta["first_nonfinite"] is None and meta["finite"] and meta["materialize"] == "Module.to_empty"
    assert out["meta_fresh"]["finite"] and out["meta_fresh"]["init"] == "init_weights"
    assert abs(meta["loss"] - out["loss"]) < 1e-5  # same weights, same buffer: the same loss as the eager build


def test_forward_smoke_fresh_path_names_a_bare_parameter_init_weights_skips(target, tiny_qwen2vl):
    """The trainer's path without training.load (meta -> to_empty -> init_weights, what G4 trains): an init_weights
    override that skips modules the inherited one marked _is_hf_initialized leaves a bare nn.Parameter as to_empty
    gave it. The eager build and the resumed-load path are fine (the checkpoint holds it); the fresh path names it."""
    res, out = _probe("forward_smoke", ["--target", str(target), "--plugin", "mindspeed_mm/fsdp/models/tinyvl",
                                        "--model-id", "tiny_vl_init_skips_marked",
                                        "--model-name-or-path", str(tiny_qwen2vl)])
    assert out["finite"]  # eager
    assert out["meta_load"]["first_nonfinite"] is None and out["meta_load"]["finite"], out["meta_load"]
    fresh = out["meta_fresh"]
    assert (fresh["first_nonfinite_kind"], fresh["first_nonfinite"]) == ("parameter", "extra.class_embedding"), fresh
    assert fresh["finite"] is False and fresh["init"] == "init_weights"
    assert not res.ok and res.error.startswith("fresh init (no load"), res.error
    assert "parameter `extra.class_embedding` is not finite after to_empty + init_weights" in res.error
    assert "resumed load" not in res.error


def test_forward_smoke_records_the_fresh_path_a_weight_loading_config_never_trains(target, tiny_qwen2vl):
    """``--fresh-untrained`` (the delivered config loads weights): the same init gap is named in ``fresh_note`` and the
    probe passes, since the load path (what that config trains) is whole; a load-path failure would still fail."""
    res, out = _probe("forward_smoke", ["--target", str(target), "--plugin", "mindspeed_mm/fsdp/models/tinyvl",
                                        "--model-id", "tiny_vl_init_skips_marked",
                                        "--model-name-or-path", str(tiny_qwen2vl), "--fresh-untrained"])
    assert res.ok, res.error
    assert out["fresh_note"].startswith("fresh init (no load"), out
    assert "parameter `extra.class_embedding` is not finite after to_empty + init_weights" in out["fresh_note"]
    assert out["meta_load"]["finite"] and out["meta_fresh"]["finite"] is False


def test_forward_smoke_fresh_untrained_still_fails_the_load_path(target):
    res, out = _probe("forward_smoke", ["--target", str(target), "--plugin", "mindspeed_mm/fsdp/models/rotary",
                                        "--model-id", "rotary_init_weights_only", "--model-name-or-path", "/nonexistent",
                                        "--fresh-untrained"])
    assert not res.ok and res.error.startswith("resumed load"), res.error
    assert "fresh_note" not in out  # the fresh path restores the buffer here


def test_forward_smoke_fresh_and_load_paths_pass_a_plugin_whose_init_covers_every_parameter(target, tiny_qwen2vl):
    res, out = _probe("forward_smoke", ["--target", str(target), "--plugin", "mindspeed_mm/fsdp/models/tinyvl",
                                        "--model-id", "tiny_vl_init_covers_all",
                                        "--model-name-or-path", str(tiny_qwen2vl)])
    assert res.ok, res.error
    for path in ("meta_fresh", "meta_load"):
        assert out[path]["first_nonfinite"] is None and out[path]["finite"], (path, out[path])
    assert abs(out["meta_load"]["loss"] - out["loss"]) < 1e-5  # the load path restores the eager weights


def test_forward_smoke_plugin_dict_output_fails(target):
    res, out = _probe("forward_smoke", ["--target", str(target), "--plugin", "mindspeed_mm/fsdp/models/tinyvl",
                                        "--model-id", "tiny_custom", "--model-name-or-path", "/nonexistent"])
    assert not res.ok and "without a .loss" in res.error
    assert out["output_type"] == "dict" and out["has_loss_attr"] is False and out["accepts_var_kwargs"] is True


OVERWRITE_PLUGIN = '''
import transformers
from mindspeed_mm.fsdp.utils.register import model_register


@model_register.register("needs_overwrite")
class NeedsOverwrite(transformers.Qwen2VLForConditionalGeneration):
    accepts_loss_kwargs = False

    @classmethod
    def overwrite_transformer_config(cls, transformer_config, model_args, feature_args):
        transformer_config.msmigrate_overwritten = True
        return transformer_config

    def forward(self, *args, **kwargs):
        if not getattr(self.config, "msmigrate_overwritten", False):
            raise RuntimeError("built without overwrite_transformer_config")
        return super().forward(*args, **kwargs)
'''


def test_forward_smoke_builds_through_overwrite_transformer_config_as_modelhub_does(target, tiny_qwen2vl, tmp_path):
    """ModelHub calls a transformers-path plugin's overwrite_transformer_config before it builds; check_forward (and
    G1's forward) must too, or a plugin that sets a token id there fails here and works in training (live run 8)."""
    root = tmp_path / "tgt"
    shutil.copytree(target, root)
    _write(root, {"mindspeed_mm/fsdp/models/overwrite/__init__.py": OVERWRITE_PLUGIN})
    res, out = _probe("forward_smoke", ["--target", str(root), "--plugin", "mindspeed_mm/fsdp/models/overwrite",
                                        "--model-id", "needs_overwrite", "--model-name-or-path", str(tiny_qwen2vl)])
    assert "built without overwrite_transformer_config" not in (res.error or "") + json.dumps(out)
    assert out["finite"] and out["loss"] > 0  # the eager build (this test target's meta path is another matter)


def test_fresh_path_still_names_the_skipped_bare_parameter_with_the_standins_storage_call(target, tiny_qwen2vl,
                                                                                          tmp_path):
    """The stand-in now gives storage as the real trainer does (to_empty_if_needed: parameters fresh, buffers kept,
    then init_model_weights): blind live run 10's init that skips marked modules is still caught on that path."""
    import shutil

    standin = Path(__file__).resolve().parents[2] / "msmigrate" / "testbeds" / "standin" / "tree"
    copy = tmp_path / "target"
    shutil.copytree(target, copy)
    for rel in ("mindspeed_mm/fsdp/utils/utils.py", "mindspeed_mm/fsdp/utils/device.py"):
        shutil.copy(standin / rel, copy / rel)
    res, out = _probe("forward_smoke", ["--target", str(copy), "--plugin", "mindspeed_mm/fsdp/models/tinyvl",
                                        "--model-id", "tiny_vl_init_skips_marked",
                                        "--model-name-or-path", str(tiny_qwen2vl)])
    fresh = out["meta_fresh"]
    assert fresh["materialize"] == "to_empty_if_needed" and fresh["init"] == "init_model_weights", fresh
    assert (fresh["first_nonfinite_kind"], fresh["first_nonfinite"]) == ("parameter", "extra.class_embedding"), fresh
    assert out["meta_load"]["finite"] and not res.ok and res.error.startswith("fresh init (no load"), res.error


def test_forward_params_sees_through_a_wrapper_forward():
    """A plugin override `forward(self, *args, **kwargs)` that passes everything on takes what its base class's
    forward names (the trainer calls it with the whole batch); the probes used to build an empty batch for it."""
    spec = importlib.util.spec_from_file_location("_model_build_for_test", PROBES_DIR / "_model_build.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(PROBES_DIR))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(PROBES_DIR))

    class Base:
        def forward(self, input_ids=None, pixel_values=None, labels=None, **kwargs):
            return None

    class Wrapper(Base):
        def forward(self, *args, **kwargs):
            return super().forward(*args, **kwargs)

    class Narrow(Base):
        def forward(self, input_ids=None, labels=None):
            return None

    assert module.forward_params(Wrapper) == (["input_ids", "pixel_values", "labels"], True)
    assert module.forward_params(Narrow) == (["input_ids", "labels"], False)
    assert module.forward_params(Base) == (["input_ids", "pixel_values", "labels"], True)
