"""Where a config's weights come from (agent/weights_load.py), the overlay that keeps one-process gates on the same
weights, the check that a launch's log shows the load, and the log lines it reads (the real trainer's texts)."""

from __future__ import annotations

from msmigrate.agent.routes.fsdp2.weights_load import (delivered_training, delivered_weights, single_process_weights,
                                                       trains_fresh_init, weights_origin, weights_problems)
from msmigrate.tools.log_parser import parse_log


def _hf(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors.index.json").write_text("{}")
    return folder


def test_origins(tmp_path):
    hf = _hf(tmp_path)
    assert weights_origin({"training": {"load": str(hf), "init_model_with_meta_device": True}}) == ("hf-load", str(hf))
    assert weights_origin({"training": {"load": str(tmp_path / "ckpt")}})[0] == "dcp-load"
    assert weights_origin({"training": {"load": str(hf), "load_format": "dcp"}})[0] == "dcp-load"
    assert weights_origin({"model": {"model_name_or_path": "m"}, "training": {}}) == ("from_pretrained", "m")
    assert weights_origin({"training": {"init_model_with_meta_device": True}}) == ("random", None)


def test_delivered_entries_follow_the_source(tmp_path):
    hf = _hf(tmp_path)
    assert delivered_weights(hf) == {"init_model_with_meta_device": True, "load": str(hf), "load_format": "auto",
                                     "no_load_optim": True, "no_load_rng": True}
    assert delivered_weights(tmp_path / "bin_only") == {"init_model_with_meta_device": False, "load": None}


def test_single_process_gates_keep_the_weights_of_a_from_pretrained_config(tmp_path):
    hf = _hf(tmp_path)
    assert single_process_weights({"model": {"model_name_or_path": str(hf)}, "training": {}})["load"] == str(hf)
    assert single_process_weights({"training": {"load": str(hf), "init_model_with_meta_device": True}}) == {}


def test_only_a_meta_build_without_load_trains_the_fresh_init_path(tmp_path):
    """G1/G2 gate the fresh meta path (init_weights, nothing loaded) only for a config that trains it: one that loads
    the source's weights, or builds with from_pretrained, never runs init_weights on a meta build (BLIP's bare
    ``cls.predictions.bias``, which upstream init leaves out, failed G1 on a path its delivered config never takes)."""
    hf = _hf(tmp_path)
    assert not trains_fresh_init(delivered_weights(hf))  # meta + HF load: the draft's config for a safetensors source
    assert not trains_fresh_init(delivered_weights(tmp_path / "bin_only"))  # from_pretrained
    assert trains_fresh_init({"init_model_with_meta_device": True})  # meta, no load: a random init
    # before the config phase: the similar example's entries with the draft's weights entries for the source
    baseline = {"training": {"init_model_with_meta_device": True, "lr": 1e-5}}
    assert not trains_fresh_init(delivered_training(None, baseline, hf))
    assert delivered_training(None, baseline, hf)["lr"] == 1e-5
    # once written, the run's YAML decides, even when it drops the load the draft would write
    assert trains_fresh_init(delivered_training({"training": {"init_model_with_meta_device": True}}, baseline, hf))


def test_g1_and_g2_record_rather_than_fail_the_fresh_path_of_a_config_that_loads_weights(tmp_path):
    from types import SimpleNamespace

    import yaml

    from msmigrate.agent.routes.fsdp2.gates.model_gate import fresh_untrained

    hf = _hf(tmp_path)
    ctx = SimpleNamespace(target=tmp_path / "target", source=hf)
    plan = {"config_path": "examples/m/m.yaml", "similar_case": None}
    assert fresh_untrained(ctx, plan)  # before the config phase: the draft loads the source's safetensors
    written = ctx.target / plan["config_path"]
    written.parent.mkdir(parents=True)
    written.write_text(yaml.safe_dump({"training": {"init_model_with_meta_device": True}}))
    assert not fresh_untrained(ctx, plan)  # a written config that trains a random init: the fresh path gates
    written.write_text(yaml.safe_dump({"training": {"init_model_with_meta_device": True, "load": str(hf)}}))
    assert fresh_untrained(ctx, plan)


LOADED = ("[Rank 0 | Local Rank 0] 2026-12-06 07:04:32,634 INFO [mindspeed_mm.fsdp.checkpoint.hf_utils:48] => Loading HF "
          "safetensors -> FSDP DTensors via every-rank-read (online): dir=/data/model arch=X layers=2 tie_emb=False\n")
MISSING = ("[Rank 0 | Local Rank 0] 2026-12-06 07:04:32,637 WARNING [mindspeed_mm.fsdp.checkpoint.hf_utils:90] => 2 "
           "parameter key(s) absent from the HF checkpoint and left uninitialized: ['a.weight', 'b.weight'].\n")


def parse_log_text(text: str):
    return parse_log(text.splitlines(keepends=True))


def test_a_launch_must_show_the_load_and_leave_nothing_out(tmp_path):
    cfg = {"training": {"load": str(_hf(tmp_path)), "init_model_with_meta_device": True}}
    ok = parse_log_text(LOADED).to_dict()
    assert ok["hf_weights_loaded"] == "/data/model" and weights_problems(cfg, ok, "G4") == []
    missing = parse_log_text(LOADED + MISSING).to_dict()
    assert "2 parameter key(s) absent from the HF checkpoint" in weights_problems(cfg, missing, "G4")[0]
    assert "no 'Loading HF safetensors' line" in weights_problems(cfg, parse_log_text("").to_dict(), "G4")[0]
    assert weights_problems({"training": {}}, parse_log_text("").to_dict(), "G4") == []


def test_g3_refuses_a_random_init_of_a_source_with_weights(tmp_path):
    from msmigrate.agent.routes.fsdp2.gates.config_gate import weights_findings

    hf = _hf(tmp_path)
    config = tmp_path / "c.yaml"
    config.write_text("training:\n  init_model_with_meta_device: true\n")
    assert "[random-init]" in weights_findings(config, hf)[0]
    assert weights_findings(config, tmp_path / "no_weights") == []
    config.write_text(f"training:\n  init_model_with_meta_device: true\n  load: {hf}\n")
    assert weights_findings(config, hf) == []


def test_g3_refuses_a_dcp_load_of_a_folder_that_holds_hf_weights_only(tmp_path):
    from msmigrate.agent.routes.fsdp2.gates.config_gate import weights_findings

    hf = _hf(tmp_path)
    config = tmp_path / "c.yaml"
    config.write_text(f"training:\n  init_model_with_meta_device: true\n  load: {hf}\n  load_format: dcp\n")
    found = weights_findings(config, hf)
    assert len(found) == 1 and found[0].startswith("[load-format-mismatch] training.load_format: 'dcp'")
    assert "set training.load_format to auto" in found[0]
    from msmigrate.knowledge.failure_context import Artifacts, gate_remedy_owner, yaml_keys

    keys = yaml_keys({"training": {"load": str(hf), "load_format": "dcp"}})
    assert gate_remedy_owner(found[0], Artifacts(config=("c.yaml",), yaml_keys=keys)).owner == "config"
    for fmt in ("auto", "hf"):  # the trainer reads the folder as HF weights
        config.write_text(f"training:\n  init_model_with_meta_device: true\n  load: {hf}\n  load_format: {fmt}\n")
        assert weights_findings(config, hf) == []
    (hf / "iter_0000006").mkdir()
    (hf / "iter_0000006" / ".metadata").write_bytes(b"")  # a DCP save beside the weights: dcp can resume it
    config.write_text(f"training:\n  init_model_with_meta_device: true\n  load: {hf}\n  load_format: dcp\n")
    assert weights_findings(config, hf) == []


def test_single_process_gates_take_the_delivered_build_path(tmp_path):
    """G4/G5 used to force a meta build whatever the delivered config does: a config that loads by from_pretrained
    from a folder without safetensors then trained a random init (no training.load) it never takes."""
    from msmigrate.agent.routes.fsdp2.weights_load import single_process_training

    hf = _hf(tmp_path)
    assert single_process_training({"model": {"model_name_or_path": str(hf)}, "training": {}}) == {
        "init_model_with_meta_device": True, "load": str(hf), "load_format": "auto", "no_load_optim": True,
        "no_load_rng": True}
    bins = tmp_path / "bins"
    bins.mkdir()
    (bins / "pytorch_model.bin").write_bytes(b"")
    delivered = {"model": {"model_name_or_path": str(bins)}, "training": {"init_model_with_meta_device": False}}
    assert single_process_training(delivered) == {}  # from_pretrained as delivered, not a random meta init
    loads = {"training": {"load": str(hf), "init_model_with_meta_device": True}}
    assert single_process_training(loads) == {}  # its own load, as written
    assert single_process_training({"model": {"model_name_or_path": str(hf)}, "training": {}}, custom=True) == {}


def test_a_model_named_by_a_hub_id_in_the_delivered_yaml_is_a_g3_finding(tmp_path):
    from msmigrate.agent.routes.fsdp2.gates.config_gate import hub_name_findings
    from msmigrate.knowledge.classifier import classify

    target, source = tmp_path / "target", tmp_path / "source"
    (target / "weights" / "local").mkdir(parents=True)
    source.mkdir()
    config = tmp_path / "c.yaml"
    config.write_text("model:\n  model_name_or_path: Qwen/Qwen2-VL-2B-Instruct\ndata:\n  dataset_param:\n"
                      "    preprocess_parameters:\n      model_name_or_path: weights/local\n")
    (found,) = hub_name_findings(config, target, source)
    assert found.startswith("[model-path-not-local] model.model_name_or_path: 'Qwen/Qwen2-VL-2B-Instruct'")
    assert classify(f"G3: {found}").case_id == "model-path-not-local"
    # an absolute path of another machine, and a folder relative to the checkout's root, are not judged
    config.write_text(f"model:\n  model_name_or_path: /data/other/host\ndata:\n  dataset_param:\n"
                      f"    preprocess_parameters:\n      model_name_or_path: weights/local\n")
    assert hub_name_findings(config, target, source) == []


def test_g3_refuses_a_load_folder_that_holds_no_checkpoint_yet(tmp_path):
    """training.load and training.save on one folder that does not exist yet (a resume habit): nothing is loaded."""
    from msmigrate.agent.routes.fsdp2.gates.config_gate import weights_findings

    hf = _hf(tmp_path)
    target = tmp_path / "checkout"
    target.mkdir()
    config = tmp_path / "c.yaml"
    config.write_text("training:\n  init_model_with_meta_device: true\n  load: ./ckpt/sft\n  save: ./ckpt/sft\n")
    (found,) = weights_findings(config, hf, target)
    assert found.startswith("[random-init] training.load: ./ckpt/sft holds no checkpoint here") and str(hf) in found
    (target / "ckpt" / "sft" / "iter_0000010").mkdir(parents=True)
    (target / "ckpt" / "sft" / "iter_0000010" / ".metadata").write_bytes(b"")  # a real DCP save: it resumes
    assert weights_findings(config, hf, target) == []
    assert weights_findings(config, hf) == []  # no checkout to read it from: not judged
