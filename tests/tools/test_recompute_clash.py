"""The recompute wrapper's ``past_key_values=None`` against transformers 5's renaming of that keyword
(probes/_recompute_clash.py, read by module_tree.py). GIT's decoder layer takes it as ``cache`` (``deprecate_kwarg``)
and its encoder passes ``cache`` by position, so the wrapper gave it twice: the sweep's git failed G4 with
``GitLayer.forward() got multiple values for argument 'cache'`` after G3 had passed the recompute plan (the tree said
the layer takes ``**kwargs``). Llama's layer is renamed the same way, but its model passes ``cache=`` by keyword: no
clash there, so recompute stays."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from probe_import import PROBES, import_probe

from msmigrate.tools.module_plan import recompute_blocked, recompute_from_tree
from msmigrate.tools.yaml_validator.patterns import ModuleTree, pattern_checks

TINY_GIT = dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=2, vocab_size=64,
                max_position_embeddings=64,
                vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                   image_size=28, patch_size=14))


def _transformers5():
    transformers = pytest.importorskip("transformers")
    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip("transformers 4.x keeps the past_key_values keyword")
    return transformers


def test_the_module_tree_probe_says_git_layers_take_no_injected_past_key_values(tmp_path):
    transformers = _transformers5()
    transformers.GitConfig(**TINY_GIT).save_pretrained(tmp_path)
    done = subprocess.run([sys.executable, str(PROBES / "module_tree.py"), "--model", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("MSMIGRATE_PROBE_RESULT "))
    tree = json.loads(line.split(" ", 1)[1])
    assert tree["accepts_var_kwargs"]["GitLayer"] is True  # what the old reading went by
    assert tree["accepts_past_key_values"]["GitLayer"] is False, tree["accepts_past_key_values"]
    assert tree["past_key_values_renamed"] == {"GitLayer": "cache"}
    assert tree["accepts_past_key_values"]["GitVisionEncoderLayer"] is True  # no renaming there: recompute stays
    assert recompute_from_tree(tree) == ["git.image_encoder.vision_model.encoder.layers.{*}"]
    why = recompute_blocked(tree)[0]["why"]
    assert "'cache'" in why and "by position" in why
    # the same GIT computes its own loss targets (labels=None to its loss function): config_fit picks loss_type raw
    assert tree["loss_without_labels"] is True


def test_a_layer_renamed_the_same_way_but_called_by_keyword_keeps_recompute():
    transformers = _transformers5()
    _recompute_clash = import_probe("_recompute_clash")
    from accelerate import init_empty_weights

    cfg = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                   num_key_value_heads=2, vocab_size=64)
    with init_empty_weights():
        llama = transformers.LlamaForCausalLM(cfg)
        git = transformers.GitForCausalLM(transformers.GitConfig(**TINY_GIT))
    assert _recompute_clash.renamed_to(type(llama.model.layers[0]))[0] == "cache"  # renamed, like GIT's
    assert _recompute_clash.past_key_values_clashes(llama, "model.layers.0") is None  # model passes cache=...
    assert _recompute_clash.past_key_values_clashes(git, "git.encoder.layer.0") == "cache"


def test_g3_names_the_clash():
    tree = ModuleTree(names=["", "enc", "enc.layer", "enc.layer.0"], classes={"enc.layer.0": "GitLayer"},
                      accepts_past_key_values={"GitLayer": False}, past_key_values_renamed={"GitLayer": "cache"})
    cfg = {"features": {"recompute": True, "recompute_plan": {"apply_modules": ["enc.layer.{*}"]}}}
    found = [f for f in pattern_checks(cfg, tree) if f.code == "recompute-rejects-past-key-values"]
    assert found and "multiple values" in found[0].message, found
