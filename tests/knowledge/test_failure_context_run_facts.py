"""Context rules that decide an owner from the run's own facts where a message alone would not (recorded failure
texts of the G1/G2/G4 probes): the runtime's own setup failing before any code of the run; the host's allocator
refusing a size the host has; an installed package failing to import its own name; a media file that exists in the
records' folder but is resolved against another; YAML data settings G2 found to be the derived ones."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msmigrate
from msmigrate.knowledge.failure_context import (RUNTIME_SETUP_SAID, Artifacts, context_owner,
                                                 derived_settings_owner, gate_remedy_owner, host_memory_shortage,
                                                 keys_valued, media_path_owner, plugin_import_owner)
from msmigrate.testbeds.faults import all_faults, wrap_runtime

PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"
PLUGIN = "mindspeed_mm/fsdp/models/qwen2_vl"
ARTIFACTS = Artifacts(model=(PLUGIN,), data=("mindspeed_mm/fsdp/data",),
                      config=("examples/qwen2_vl/qwen2_vl_config.yaml", "examples/qwen2_vl/finetune_qwen2_vl.sh"),
                      host_memory=16 * 2**30)

# G1's model-build probe, as recorded (the allocator refusing the first weight on a host whose memory is held)
ALLOC = ("plugin does not build on meta: RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: "
         "not enough memory: you tried to allocate 268435456 bytes. (raised in /opt/rt/lib/python3.11/site-packages/"
         "torch/nn/modules/sparse.py:167 in __init__)")
# G1's probe: the installed torch's own module importing a name its torch.distributed.fsdp lacks
TORCH_SELF_IMPORT = ("plugin does not build on meta: ImportError: cannot import name 'fully_shard' from "
                     "'torch.distributed.fsdp' (/opt/rt/lib/python3.11/site-packages/torch/distributed/fsdp/__init__.py)"
                     " (raised in /opt/rt/lib/python3.11/site-packages/torch/distributed/_composable/fsdp/fully_shard.py"
                     f":3 in <module>; called from {PLUGIN}/modeling_qwen2_vl.py:7 in <module>: `from transformers "
                     "import (`)")
# G2's data check, as recorded: records whose first turn is the assistant's
ROLES = ("data pipeline failed: StopIteration:  — the target logged before it: mindspeed_mm.fsdp.data.data_utils."
         "func_utils.convert: Skipping sample: invalid role tag at turn 0 (got 'assistant', expected one of ('user', "
         "'observation')).")


def test_a_failure_of_the_runtimes_own_setup_is_environment():
    text = f"plugin does not build on meta: RuntimeError: {RUNTIME_SETUP_SAID} (torch.distributed alone, before any " \
           "code of the run): RuntimeError: Distributed package doesn't have Gloo built in (raised in " \
           "/x/msmigrate/tools/probes/_single_rank.py:57 in start_single_rank)"
    verdict = context_owner(text, ARTIFACTS)
    assert (verdict.owner, verdict.rule) == ("environment", "runtime") and "gloo" in verdict.reason
    # without the setup's words the same error decides nothing here (no frame, no key, no host errno)
    assert context_owner("RuntimeError: Distributed package doesn't have Gloo built in", ARTIFACTS) is None


def test_the_probes_setup_says_so_when_the_runtimes_torch_has_no_gloo(tmp_path):
    """The blind group's gloo-less runtime, run through the probes' real setup in a wrapped interpreter."""
    fault = next(f for f in all_faults() if f.runtime is not None and "gloo" in f.fix)
    python = wrap_runtime(fault.runtime, sys.executable, tmp_path / "rt")
    code = (f"import sys; sys.path.insert(0, {str(PROBES)!r}); from _single_rank import start_single_rank\n"
            "try:\n    start_single_rank()\nexcept RuntimeError as exc:\n    print(exc)\n")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert RUNTIME_SETUP_SAID in out.stdout and "Gloo" in out.stdout, out.stdout + out.stderr


def test_the_host_allocator_refusing_a_size_the_host_has_is_environment_and_a_size_beyond_it_is_not():
    verdict = context_owner(ALLOC, ARTIFACTS)
    assert (verdict.owner, verdict.rule) == ("environment", "host") and "memory" in verdict.reason
    assert host_memory_shortage(ALLOC, 128 * 2**20) == ""  # 256 MiB asked of a 128 MiB host: a wrong size
    assert host_memory_shortage(ALLOC, None) == ""  # host size unknown: undecided
    frame = ALLOC.replace("(raised in", f"(called from {PLUGIN}/modeling_qwen2_vl.py:40 in __init__; raised in")
    assert context_owner(frame, ARTIFACTS).owner == "model"  # a frame of the plugin decides first


def test_an_installed_package_failing_to_import_its_own_name_is_environment_not_the_plugins_import():
    verdict = plugin_import_owner(TORCH_SELF_IMPORT, ARTIFACTS, "Qwen2VLForConditionalGeneration", "qwen2_vl")
    assert (verdict.owner, verdict.rule) == ("environment", "plugin-import")
    assert "torch" in verdict.reason and "fully_shard" in verdict.reason
    # the plugin's own import of a name the library lacks stays the plugin's
    own = (f"ImportError: cannot import name 'Qwen2VLFancy' from 'transformers' (raised in {PLUGIN}/"
           "modeling_qwen2_vl.py:7 in <module>)")
    assert plugin_import_owner(own, ARTIFACTS, "Qwen2VLForConditionalGeneration", "qwen2_vl").owner == "model"


def _media_layout(tmp_path):
    """(the records' folder holding images/sample_00.png, an empty target, the loader's error naming it relative)"""
    records = tmp_path / "source" / "data"
    (records / "images").mkdir(parents=True)
    (records / "images" / "sample_00.png").write_bytes(b"png")
    (tmp_path / "target").mkdir()
    return records, tmp_path / "target", "FileNotFoundError: [Errno 2] No such file or directory: 'images/sample_00.png'"


def test_a_media_file_present_in_the_records_folder_is_a_path_setting(tmp_path):
    records, target, text = _media_layout(tmp_path)
    artifacts = Artifacts(config=("c.yaml",), records=(str(records),),
                          yaml_values={"data.dataset_param.basic_parameters.dataset_dir": "./data",
                                       "data.dataset_param.basic_parameters.template": "qwen2vl"})
    verdict = media_path_owner(text, artifacts, target, records)
    assert verdict.owner == "config" and "data.dataset_param.basic_parameters.dataset_dir" in verdict.reason
    # the file itself absent: no decision here (the media case's data stands)
    assert media_path_owner(text.replace("sample_00", "sample_99"), artifacts, target, records) is None


def test_settings_g2_found_as_derived_send_a_contradicting_record_to_data():
    yaml_values = {"data.dataset_param.attr.role_tag": "role", "data.dataset_param.attr.user_tag": "user",
                   "data.dataset_param.attr.assistant_tag": "assistant", "data.dataset_param.attr.content_tag":
                   "content"}
    artifacts = Artifacts(config=("c.yaml",), records=("/src/data",), yaml_values=yaml_values)
    named = keys_valued(ROLES, artifacts)
    assert set(named) >= {"data.dataset_param.attr.user_tag", "data.dataset_param.attr.assistant_tag"}
    same = {"same": sorted(yaml_values), "differ": {}}
    verdict = derived_settings_owner(named, same, artifacts)
    assert (verdict.owner, verdict.rule) == ("data", "derived-settings") and "train.json" in verdict.reason
    # a named setting that differs from the derived one is not decided here
    assert derived_settings_owner(named, {"same": ["data.dataset_param.attr.role_tag"]}, artifacts) is None
    assert derived_settings_owner([], same, artifacts) is None


def test_g2s_as_derived_remedy_line_is_read_as_the_gates_remedy():
    from msmigrate.agent.routes.fsdp2.gates.data_settings import compare_data_settings

    delivered = {"data": {"dataset_param": {"basic_parameters": {"template": "qwen3_vl_nothink", "train_on_prompt":
                                                                 True, "dataset_dir": "./data", "cutoff_len": 1024}}}}
    derived = json.loads(json.dumps(delivered))
    derived["data"]["dataset_param"]["basic_parameters"].update(template="qwen2vl", train_on_prompt=False,
                                                                dataset_dir="/src/data")
    differ, same = compare_data_settings(delivered, derived)
    assert set(differ) == {"data.dataset_param.basic_parameters.template",
                           "data.dataset_param.basic_parameters.train_on_prompt"}  # an input path is not a setting
    assert same == ["data.dataset_param.basic_parameters.cutoff_len"]
    line = ("data settings: the same check passes with the YAML's data settings that differ from what this migration "
            "derives set as derived: set `data.dataset_param.basic_parameters.train_on_prompt` to False (it is True) "
            "in c.yaml")
    keys = {"train_on_prompt": "data.dataset_param.basic_parameters.train_on_prompt"}
    verdict = gate_remedy_owner(line, Artifacts(config=("c.yaml",), yaml_keys=keys))
    assert verdict.owner == "config" and "train_on_prompt" in verdict.reason


def test_a_key_the_delivered_yaml_adds_to_a_derived_section_is_unset_in_the_recheck_and_named_to_remove():
    from msmigrate.agent.routes.fsdp2.gates.data_settings import compare_data_settings

    attr = {"images": "images", "messages": "messages"}
    derived = {"data": {"dataset_param": {"attr": dict(attr)}}}
    delivered = {"data": {"dataset_param": {"attr": {**attr, "videos": "images", "cache_dir": "/c"}},
                          "extra_section": {"k": 1}}}
    differ, same = compare_data_settings(delivered, derived)
    # a pasted key in a section the migration writes; not an input path, not a section it does not write
    assert differ == {"data.dataset_param.attr.videos": ("images", None)}
    line = ("data settings: the same check passes with the YAML's data settings that differ from what this migration "
            "derives set as derived: remove `data.dataset_param.attr.videos` (it is 'images'; this migration derives "
            "no such key) in c.yaml")
    keys = {"videos": "data.dataset_param.attr.videos"}
    assert gate_remedy_owner(line, Artifacts(config=("c.yaml",), yaml_keys=keys)).owner == "config"


def test_a_call_that_does_not_fit_a_plugin_class_is_the_plugins_signature():
    from msmigrate.knowledge.failure_context import signature_owner

    text = ("plugin does not build on meta: TypeError: Qwen2VLForConditionalGeneration.__init__() missing 1 required "
            "positional argument: 'vision_config' (raised in /opt/rt/lib/python3.11/site-packages/transformers/"
            "modeling_utils.py:1453 in _from_config)")
    classes = {"Qwen2VLForConditionalGeneration": f"{PLUGIN}/modeling_qwen2_vl.py"}
    verdict = signature_owner(text, classes)
    assert (verdict.owner, verdict.rule) == ("model", "signature") and "modeling_qwen2_vl.py" in verdict.reason
    assert signature_owner(text, {"Other": "x.py"}) is None  # a library's class: not decided here


def test_a_sigterm_the_launcher_did_not_send_is_the_host():
    text = ("single-process: launch failed: ChildFailedError: rank 0 exitcode -15 Signal 15 (SIGTERM) received by "
            "PID 1903; single-process: only 1 iteration lines (need ≥ 5)")
    verdict = context_owner(text, ARTIFACTS)
    assert (verdict.owner, verdict.rule) == ("environment", "host") and "SIGTERM" in verdict.reason
    # the launcher's own stop at its time limit says so: not decided as the host
    assert context_owner("launch timeout: rank 0 exitcode -15 Signal 15 (SIGTERM) received", ARTIFACTS) is None


def test_a_package_the_runtime_cannot_import_is_environment_and_the_probes_path_labels_name_no_setting():
    # G1's forward smoke as recorded: its labels of the meta-init paths mention training.load, the error does not
    text = ("forward smoke failed: fresh init (no load: the trainer's init_model_with_meta_device without "
            "training.load, meta -> to_empty -> init_weights, what G4 trains): ModuleNotFoundError: import of "
            "accelerate halted; None in sys.modules; resumed load (init_model_with_meta_device with training.load, "
            "meta -> to_empty -> checkpoint load, init_weights skipped, what G5's load run trains): "
            "ModuleNotFoundError: import of accelerate halted; None in sys.modules")
    keyed = Artifacts(model=(PLUGIN,), data=("mindspeed_mm/fsdp/data",), config=ARTIFACTS.config,
                      yaml_keys={"load": "training.load",
                                 "init_model_with_meta_device": "training.init_model_with_meta_device"})
    from msmigrate.knowledge.failure_context import keys_named

    assert keys_named(text, keyed) == []
    verdict = context_owner(text, keyed)
    assert (verdict.owner, verdict.rule) == ("environment", "runtime") and "accelerate" in verdict.reason
    # a module of the run's own packages is no installed package
    assert context_owner("ModuleNotFoundError: No module named 'mindspeed_mm.fsdp.models.other'", keyed) is None


def test_a_media_file_a_yaml_setting_does_resolve_is_not_the_settings(tmp_path):
    """The YAML's folder setting resolves the file, yet the error names it relative: the code that opened it did not
    use the setting (the data path's), whatever other path-valued settings the YAML holds."""
    records, target, text = _media_layout(tmp_path)
    artifacts = Artifacts(config=("c.yaml",), records=(str(records),),
                          yaml_values={"data.dataset_param.basic_parameters.dataset_dir": str(records),
                                       "data.dataset_param.preprocess_parameters.model_name_or_path":
                                           str(tmp_path / "source")})
    assert media_path_owner(text, artifacts, target, records) is None


def test_the_keys_g3s_findings_name_lead_the_config_diagnosis():
    from msmigrate.agent.failure_artifacts import finding_keys

    keyed = Artifacts(yaml_keys={"fully_shard_parallel_size": "parallel.fully_shard_parallel_size",
                                 "drop_last": "data.dataloader_param.drop_last"})
    text = ("[value-out-of-range] parallel.fully_shard_parallel_size: parallel.fully_shard_parallel_size is 8, but "
            "l.sh starts 2 rank(s)\n[bad-dataloader-value] data.dataloader_param.drop_last: false\n"
            "[launch-port] MASTER_PORT: l.sh sets MASTER_PORT to 600000")
    assert finding_keys(text, keyed) == ["parallel.fully_shard_parallel_size", "data.dataloader_param.drop_last"]
