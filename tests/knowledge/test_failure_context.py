"""The run's context decides an owner the excerpt leaves open: frames in the run's own artifacts, the YAML loader,
keys of the run's YAML, host errors, the last change; whose import failed; whose registration misses the id."""

from __future__ import annotations

from msmigrate.knowledge.failure_context import (Artifacts, RegistryFact, context_owner, gate_remedy_owner, keys_named,
                                                 plugin_import_owner, registration_owner, run_frames,
                                                 source_batch_owner, yaml_keys)

ART = Artifacts(model=("mindspeed_mm/fsdp/models/tiny_vl",),
                data=("mindspeed_mm/fsdp/data/datasets/huggingface", "mindspeed_mm/fsdp/data/data_utils/func_utils",
                      "mindspeed_mm/fsdp/data/dataloader/data_collator.py"),
                config=("examples/tiny_vl/tiny_vl_config.yaml", "examples/tiny_vl/finetune_tiny_vl.sh"),
                records=("/data/src/data",),
                yaml_keys=yaml_keys({"training": {"micro_batch_size": 1, "gradient_accumulation_steps": 1, "lr": 1e-4},
                                     "model": {"model_id": "tiny_vl"}}))

TRACEBACK = '''Traceback (most recent call last):
  File "/runs/x/worktree/mindspeed_mm/fsdp/train/trainer.py", line 40, in train
    loss = model(**batch).loss
  File "/runs/x/worktree/mindspeed_mm/fsdp/models/tiny_vl/modeling_tiny_vl.py", line 31, in forward
    out.loss = out.loss + 0.0 * self.mm_projector.weight.sum()
  File "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1940, in __getattr__
    raise AttributeError
AttributeError: 'TinyVL' object has no attribute 'mm_projector'
'''


def test_the_innermost_frame_of_the_runs_own_code_decides():
    verdict = context_owner(TRACEBACK, ART)
    assert verdict.owner == "model" and verdict.rule == "frames"
    assert "modeling_tiny_vl.py:31" in verdict.reason
    collator = TRACEBACK.replace("mindspeed_mm/fsdp/models/tiny_vl/modeling_tiny_vl.py",
                                 "mindspeed_mm/fsdp/data/data_utils/func_utils/collator.py")
    assert context_owner(collator, ART).owner == "data"


def test_framework_and_installed_frames_decide_nothing():
    sampler = ('  File "/w/mindspeed_mm/fsdp/data/dataloader/sampler.py", line 12, in __iter__\n'
               '  File "/venv/lib/python3.11/site-packages/torch/utils/data/sampler.py", line 3, in x\n'
               "ZeroDivisionError: integer division or modulo by zero")
    assert run_frames(sampler, ART) == [] and context_owner(sampler, ART) is None


def test_the_probes_raised_in_called_from_note_is_read_as_frames():
    note = ("forward smoke failed: TypeError: bad (raised in /venv/lib/python3.11/site-packages/torch/nn/functional.py"
            ":2615 in embedding; called from mindspeed_mm/fsdp/models/tiny_vl/modeling_tiny_vl.py:24 in forward)")
    assert context_owner(note, ART).owner == "model"


def test_a_record_or_media_file_is_data():
    text = "FileNotFoundError: [Errno 2] No such file\n  File \"/data/src/data/train.json\", line 1"
    assert context_owner(text, ART).owner == "data"


def test_config_loading_failures_are_config_in_any_gate():
    yaml_error = "yaml.scanner.ScannerError: while scanning for the next token\nfound character '\\t' that cannot start"
    assert context_owner(yaml_error, ART).rule == "config-loading"
    pydantic = "pydantic_core._pydantic_core.ValidationError: 1 validation error for TrainingArguments\nlr\n  Input"
    assert context_owner(pydantic, ART).owner == "config"


def test_a_specific_key_of_the_runs_yaml_named_in_the_error_line_is_config():
    text = "ValueError: gradient_accumulation_steps must be positive"
    assert keys_named(text, ART) == ["training.gradient_accumulation_steps"]
    assert context_owner(text, ART).owner == "config"
    assert context_owner("ValueError: lr is wrong", ART) is None  # a word like `lr` is not specific enough


def test_host_errors_without_run_frames_are_environment():
    for text in ("OSError: [Errno 28] No space left on device: '/ckpt/__0_0.distcp'",
                 "OSError: [Errno 30] Read-only file system: '/ckpt/.metadata'",
                 "RuntimeError: [enforce fail at gloo/transport/tcp/device.cc:83] ifa != nullptr. Unable to find "
                 "address for: ens1f0np0",
                 # SIGBUS in a loader worker: a shared-memory segment the host could not back
                 "RuntimeError: DataLoader worker (pid 77) is killed by signal: Bus error.",
                 "torch.distributed.elastic.multiprocessing.api: failed (exitcode: -7) local_rank: 0 (pid: 12) of "
                 "binary: python; Signal 7 (SIGBUS) received by PID 12 ... died with <Signals.SIGBUS: 7>",
                 # the process's own limits: open files, memory, threads; no usable temporary folder
                 "OSError: [Errno 24] Too many open files: '/dev/shm/torch_77_1'",
                 "OSError: [Errno 12] Cannot allocate memory",
                 "RuntimeError: can't start new thread",
                 "FileNotFoundError: [Errno 2] No usable temporary directory found in ['/tmp', '/var/tmp']"):
        assert context_owner(text, ART).owner == "environment", text


def test_a_resource_limit_signal_is_the_hosts_and_says_which_limit():
    for text in ("torch.distributed.elastic.multiprocessing.api: failed (exitcode: -24) local_rank: 1 (pid: 31) of "
                 "binary: python\nexitcode  : -24 (pid: 31)\nSignal 24 (SIGXCPU) received by PID 31",
                 "CPU time limit exceeded (core dumped)",
                 "died with <Signals.SIGXFSZ: 25>"):
        verdict = context_owner(text, ART)
        assert verdict.owner == "environment" and verdict.rule == "host", text
        assert "ulimit -t" in verdict.reason and "ulimit -f" in verdict.reason
    # a time limit of the run's own launcher is no resource limit of the host
    assert "ulimit" not in context_owner("OSError: [Errno 28] No space left on device", ART).reason


def test_the_last_change_decides_only_when_nothing_else_does():
    assert context_owner("RuntimeError: something odd", ART, changed_last="data").rule == "last-change"
    assert context_owner(TRACEBACK, ART, changed_last="data").owner == "model"


def test_a_plugin_import_of_a_name_the_library_lacks_is_model_unless_it_is_the_sources_architecture():
    wrong = ("ImportError: cannot import name 'PreTrainedModelWithHeads' from 'transformers.modeling_utils'\n"
             '  File "mindspeed_mm/fsdp/models/tiny_vl/modeling_tiny_vl.py", line 3, in <module>')
    assert plugin_import_owner(wrong, ART, "TinyVLForConditionalGeneration", "tiny_vl").owner == "model"
    older = ("ModuleNotFoundError: No module named 'transformers.models.tiny_vl'\n"
             '  File "mindspeed_mm/fsdp/models/tiny_vl/modeling_tiny_vl.py", line 3, in <module>')
    assert plugin_import_owner(older, ART, "TinyVLForConditionalGeneration", "tiny_vl").owner == "environment"
    assert plugin_import_owner(wrong.splitlines()[0], ART, None, None) is None  # no frame of the plugin


def test_an_unregistered_id_is_owned_by_the_side_that_left_the_plan():
    text = "KeyError: \"ID 'tiny_vl' is not registered.\""
    plugin = registration_owner(text, [RegistryFact("model.model_id", "tiny_vl", "tiny_vl", ("hf_tiny_vl",),
                                                    "model", "m/modeling.py")])
    assert plugin.owner == "model" and "m/modeling.py" in plugin.reason
    yaml_side = registration_owner("KeyError: \"ID 'tinyvl' is not registered.\"",
                                   [RegistryFact("model.model_id", "tinyvl", "tiny_vl", ("tiny_vl",), "model")])
    assert yaml_side.owner == "config" and "model.model_id" in yaml_side.reason
    collator = registration_owner("ValueError: No data collator is registered as qwen2_vl. Available collators: "
                                  "llm_pretrain, qwen3vl.",
                                  [RegistryFact("data.dataloader_param.collate_param.collator_id", "qwen2_vl",
                                                "qwen3vl", ("llm_pretrain", "qwen3vl"), "data")])
    assert collator.owner == "config"
    template = registration_owner("ValueError: Template tiny does not exist.",
                                  [RegistryFact("data.dataset_param.basic_parameters.template", "tiny", "tiny",
                                                ("qwen2vl",), "data")])
    assert template.owner == "data"
    registered = [RegistryFact("model.model_id", "tiny_vl", "tiny_vl", ("tiny_vl",), "model")]
    assert registration_owner(text, registered) is None


def test_keys_are_named_by_the_values_an_error_line_quotes():
    from msmigrate.knowledge.failure_context import keys_valued, yaml_values

    data = {"training": {"lr": 0.0001, "lr_min": 0.001, "seed": 42, "micro_batch_size": 1, "stage": "sft"}}
    art = Artifacts(yaml_values=yaml_values(data))
    line = "  Value error, Learning rate 0.0001 < minimum lr 0.001. Check scheduler configuration."
    assert keys_valued(line, art) == ["training.lr", "training.lr_min"]
    assert keys_valued("RuntimeError: rank 1 of 42 failed", art) == []  # an integer names nothing


def test_a_package_that_cannot_work_in_the_runtime_is_environment():
    for text in ("ImportError: tokenizers>=0.23.1,<0.24.0 is required for a normal functioning of this module, but "
                 "found tokenizers==0.10.3.",
                 "ImportError: numpy.core.multiarray failed to import (A module that was compiled using NumPy 1.x "
                 "cannot be run in NumPy 2.0.2 as it may crash)"):
        verdict = context_owner(text, ART)
        assert (verdict.owner, verdict.rule) == ("environment", "runtime"), text


def test_a_lazy_import_of_the_sources_own_architecture_is_environment():
    text = ("ModuleNotFoundError: Could not import module 'TinyVLForConditionalGeneration'. Are this object's "
            "requirements defined correctly?\n"
            '  File "mindspeed_mm/fsdp/models/tiny_vl/modeling_tiny_vl.py", line 2, in <module>')
    assert plugin_import_owner(text, ART, "TinyVLForConditionalGeneration", "tiny_vl").owner == "environment"


def test_a_lazy_import_that_failed_on_what_the_library_imports_names_that_cause():
    # the probe's one line carries the exception the library raised its own message from (``error_with_place``)
    text = ("plugin does not build on meta: ModuleNotFoundError: Could not import module "
            "'TinyVLForConditionalGeneration'. Are this object's requirements defined correctly? (raised in "
            "/v/lib/python3.11/site-packages/transformers/utils/import_utils.py:2810 in __getattr__; called from "
            "mindspeed_mm/fsdp/models/tiny_vl/modeling_tiny_vl.py:2 in <module>: `from transformers import (`); "
            "caused by AttributeError: module 'PIL.Image' has no attribute 'Resampling' (raised in "
            "/v/lib/python3.11/site-packages/transformers/image_utils.py:55 in <module>)\n"
            '  File "mindspeed_mm/fsdp/models/tiny_vl/modeling_tiny_vl.py", line 2, in <module>')
    said = plugin_import_owner(text, ART, "TinyVLForConditionalGeneration", "tiny_vl")
    assert said.owner == "environment"
    assert "has no attribute 'Resampling'" in said.reason and "the installed `PIL` (pillow)" in said.reason


def test_a_loss_without_graph_goes_to_the_forward_unless_the_yaml_freezes_something():
    from msmigrate.knowledge.failure_context import Artifacts, context_owner

    text = "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn"
    nothing = Artifacts(model=("mindspeed_mm/fsdp/models/m",), config=("examples/m/m.yaml",), frozen=())
    said = context_owner(text, nothing)
    assert (said.owner, said.rule) == ("model", "loss-graph") and "mindspeed_mm/fsdp/models/m" in said.reason
    frozen = Artifacts(model=("mindspeed_mm/fsdp/models/m",), config=("examples/m/m.yaml",),
                       frozen=("model.visual", "model.language_model"))
    said = context_owner(text, frozen)
    assert (said.owner, said.rule) == ("config", "loss-graph") and "model.visual" in said.reason
    assert context_owner(text, Artifacts(frozen=None)) is None  # no YAML read: nothing decides


def test_pydantic_field_locations_name_the_key_even_a_generic_leaf():
    from msmigrate.knowledge.failure_context import Artifacts, keys_named

    text = ("pydantic_core._pydantic_core.ValidationError: 1 validation error for Arguments\n"
            "training.lr\n"
            "  Input should be a valid number, unable to parse string as a number [type=float_parsing]\n\n"
            "The above exception was the direct cause of the following exception:\n"
            "seed\n")
    artifacts = Artifacts(yaml_keys={"lr": "training.lr", "seed": "training.seed", "model_id": "model.model_id"})
    assert keys_named(text, artifacts) == ["training.lr"]  # not `seed`: that line is outside the pydantic block


def test_a_setting_the_gate_check_says_to_change_decides_config():
    from msmigrate.knowledge.failure_context import Artifacts, gate_remedy_owner

    artifacts = Artifacts(config=("examples/m/m.yaml",),
                          yaml_keys={"cutoff_len": "data.dataset_param.basic_parameters.cutoff_len"})
    gate = ("cutoff_len 16 cuts the media tokens of 3 of 3 samples with media: sample 0 keeps 2 of its 16 media "
            "tokens; raise data.dataset_param.basic_parameters.cutoff_len to at least 60")
    said = gate_remedy_owner(gate, artifacts)
    assert (said.owner, said.rule) == ("config", "gate-remedy") and "cutoff_len" in said.reason
    assert gate_remedy_owner("raise training.not_a_key to 3", artifacts) is None  # not a key of this YAML
    assert gate_remedy_owner("the loss is not finite", artifacts) is None


def test_a_file_the_gates_own_check_traced_the_cause_to_decides_its_owner():
    arts = Artifacts(model=("mindspeed_mm/fsdp/models/tiny",),
                     data=("mindspeed_mm/fsdp/data/data_utils/func_utils",
                           "mindspeed_mm/fsdp/data/dataloader/data_collator.py"))
    line = ("data parity: row 0: 10 of the 10 positions the collator added (padding) train: the collator X (defined "
            "in mindspeed_mm/fsdp/data/dataloader/data_collator.py) pads the labels with a token id")
    verdict = gate_remedy_owner(line, arts)
    assert verdict.owner == "data" and "data_collator.py" in verdict.reason
    # a file outside this run's artifacts (the framework's own) decides nothing
    assert gate_remedy_owner("the sampler S (defined in mindspeed_mm/fsdp/data/dataloader/sampler.py)", arts) is None
    # G1's forward smoke names the file whose forward returned an output without .loss: the plugin's own override
    smoke = ("forward smoke failed: forward returned tuple without a .loss (the engine reads output.loss) by "
             "Tiny.forward (defined in mindspeed_mm/fsdp/models/tiny/modeling_tiny.py)")
    assert gate_remedy_owner(smoke, arts).owner == "model"
    # the library's forward (no override in the plugin) decides nothing
    lib = smoke.replace("mindspeed_mm/fsdp/models/tiny/modeling_tiny.py",
                        "../../.venv/lib/python3.11/site-packages/transformers/models/tiny/modeling_tiny.py")
    assert gate_remedy_owner(lib, arts) is None


def test_a_host_error_naming_a_runtime_variables_value_names_that_variable():
    text = ("RuntimeError: [enforce fail at gloo/transport/tcp/device.cc:83] ifa != nullptr. Unable to find "
            "address for: ens1f0np0")
    arts = Artifacts(environment={"GLOO_SOCKET_IFNAME": "ens1f0np0", "MASTER_ADDR": "127.0.0.1"})
    verdict = context_owner(text, arts)
    assert verdict.owner == "environment" and "GLOO_SOCKET_IFNAME" in verdict.reason
    assert "MASTER_ADDR" not in verdict.reason
    assert "GLOO_SOCKET_IFNAME" not in context_owner(text, Artifacts()).reason


def test_at_g1_a_data_verdict_stands_only_on_a_record_or_media_file():
    """G1's batch is the source processor's own: the run's data path made none of it, so a failure there that names
    no record or media file is the plugin's; one that names a file of the records stays data."""
    text = "forward smoke failed: ValueError: Image features and image tokens do not match, tokens: 0, features: 4"
    verdict = source_batch_owner(text, ART)
    assert verdict.owner == "model" and "tiny_vl" in verdict.reason
    unreadable = "UnidentifiedImageError: cannot identify image file '/data/src/data/images/a.png'"
    assert source_batch_owner(unreadable, ART) is None


def test_a_setting_the_gate_re_ran_its_check_with_outranks_the_code_object_it_traced():
    """G2 traced trained padding to the collator, then passed with the YAML's data settings set as derived: the
    collator only did what the setting told it, so the YAML is the fix (config), not the collator's file."""
    from msmigrate.knowledge.failure_context import Artifacts, gate_remedy_owner

    key = "data.dataloader_param.collate_param.ignore_pad_token_for_loss"
    arts = Artifacts(config=("examples/m/m.yaml",), yaml_keys={"ignore_pad_token_for_loss": key},
                     data=("mindspeed_mm/fsdp/data/dataloader/data_collator.py",))
    traced = ("data parity: row 1: 4 of the 4 positions the collator added (padding) train: the collator X (defined "
              "in mindspeed_mm/fsdp/data/dataloader/data_collator.py) pads the labels with a token id")
    assert gate_remedy_owner(traced, arts).owner == "data"
    both = (f"{traced}; data settings: the same check passes with the YAML's data settings that differ from what "
            f"this migration derives set as derived: set `{key}` to True (it is False) in examples/m/m.yaml")
    verdict = gate_remedy_owner(both, arts)
    assert verdict.owner == "config" and key in verdict.reason


def test_a_file_of_an_installed_package_that_does_not_parse_is_a_broken_install():
    from msmigrate.knowledge.failure_context import broken_install_owner

    text = ("plugin does not build on meta: SyntaxError: '(' was never closed (modeling_x.py, line 1187) (raised in "
            "/v/lib/python3.11/site-packages/transformers/models/x/modeling_x.py:1187 in <module>; called from "
            "mindspeed_mm/fsdp/models/x/modeling_x.py:3)")
    verdict = broken_install_owner(text)
    assert verdict.owner == "environment" and "transformers" in verdict.reason
    # the plugin's own file that does not parse is not an install's
    assert broken_install_owner("SyntaxError: invalid syntax (raised in mindspeed_mm/fsdp/models/x/m.py:3)") is None


def test_a_module_the_target_itself_imports_missing_is_the_environments_not_the_plugins():
    from msmigrate.knowledge.failure_context import Artifacts, plugin_import_owner

    arts = Artifacts(model=("mindspeed_mm/fsdp/models/x",))
    text = ("ModuleNotFoundError: No module named 'mindspeed.fsdp'\n"
            '  File "mindspeed_mm/fsdp/models/x/modeling_x.py", line 11, in <module>\n')
    assert plugin_import_owner(text, arts, "XForCausalLM", "x").owner == "model"
    assert plugin_import_owner(text, arts, "XForCausalLM", "x", {"mindspeed.fsdp"}).owner == "environment"


def test_target_imports_are_read_from_the_target_outside_the_plugin(tmp_path):
    from msmigrate.agent.failure_artifacts import target_imports_of

    (tmp_path / "pkg/models/x").mkdir(parents=True)
    (tmp_path / "pkg/train").mkdir(parents=True)
    (tmp_path / "pkg/models/x/m.py").write_text("from lib.only_plugin import A\nfrom lib.shared import B\n")
    (tmp_path / "pkg/train/t.py").write_text("from lib.shared.sub import C\n")
    text = "No module named 'lib.shared'\nNo module named 'lib.only_plugin'"
    assert target_imports_of(tmp_path, "pkg/models/x", text) == {"lib.shared"}
    # a module the target imports only behind a try, a platform check or in a function is one it does without
    (tmp_path / "pkg/utils").mkdir()
    (tmp_path / "pkg/utils/device.py").write_text(
        "try:\n    import npu_ext\nexcept ImportError:\n    npu_ext = None\nif ON_NPU:\n    import npu_ops\n\n"
        "def f():\n    import npu_lazy\n")
    (tmp_path / "pkg/models/x/m.py").write_text("import npu_ext\nimport npu_ops\nimport npu_lazy\n")
    said = "No module named 'npu_ext'\nNo module named 'npu_ops'\nNo module named 'npu_lazy'"
    assert target_imports_of(tmp_path, "pkg/models/x", said) == set()
    (tmp_path / "pkg/utils/ops.py").write_text("import npu_ops.fused\n")  # a file of the target that requires it
    assert target_imports_of(tmp_path, "pkg/models/x", said) == {"npu_ops"}
    # with the trainer there, only what it imports when it starts counts: ops.py is another task's
    (tmp_path / "pkg/__init__.py").write_text("")
    (tmp_path / "pkg/train/__init__.py").write_text("")
    (tmp_path / "pkg/train/trainer.py").write_text("import lib.shared\nfrom ..utils import device\nfrom . import t\n")
    assert target_imports_of(tmp_path, "pkg/models/x", said + "\nNo module named 'lib.shared'",
                             entry="pkg/train/trainer.py") == {"lib.shared"}
    (tmp_path / "pkg/utils/device.py").write_text("import npu_ops\n")  # now the trainer's own import requires it
    assert target_imports_of(tmp_path, "pkg/models/x", said, entry="pkg/train/trainer.py") == {"npu_ops"}


def test_a_processor_the_sources_own_folder_cannot_give_is_the_inputs_not_the_data_paths(tmp_path):
    from msmigrate.knowledge.failure_context import input_folder_owner

    source = tmp_path / "source"
    source.mkdir()
    text = (f"ValueError: Processor was not found, please check and update your model file. — Processor was not "
            f"found: Can't load image processor for '{source}'. If you were trying to load it from "
            f"'https://huggingface.co/models', make sure you don't have a local directory with the same name.")
    said = input_folder_owner(text, source)
    assert said.owner == "environment" and "preprocessor_config.json" in said.reason and str(source) in said.reason
    assert input_folder_owner(text, tmp_path / "elsewhere") is None  # another folder: the YAML's path
    (source / "preprocessor_config.json").write_text("{}")
    assert input_folder_owner(text, source) is None  # the file is there: the cause is elsewhere


def test_a_file_the_yaml_names_that_is_not_there_is_the_yamls_whatever_code_opened_it(tmp_path):
    from msmigrate.knowledge.failure_context import yaml_file_owner, yaml_values

    art = Artifacts(config=("examples/x/x.yaml",), records=(str(tmp_path / "src" / "data"),),
                    yaml_values=yaml_values({"data": {"dataset_param": {"basic_parameters": {
                        "chat_template": "examples/other/chat_template.jinja",
                        "dataset": str(tmp_path / "src" / "data" / "train.json")}}}}))
    said = ("data pipeline failed: FileNotFoundError: [Errno 2] No such file or directory: "
            "'examples/other/chat_template.jinja'")
    verdict = yaml_file_owner(said, art, tmp_path, [tmp_path / "src", *art.records])
    assert verdict.owner == "config" and "data.dataset_param.basic_parameters.chat_template" in verdict.reason
    # the file is there (from the checkout's root): not the YAML's
    (tmp_path / "examples" / "other").mkdir(parents=True)
    (tmp_path / "examples" / "other" / "chat_template.jinja").write_text("{{ x }}")
    assert yaml_file_owner(said, art, tmp_path, []) is None
    # a records file the YAML points at, under the run's inputs: what is missing is the file, not the setting
    records = said.replace("examples/other/chat_template.jinja", str(tmp_path / "src" / "data" / "train.json"))
    assert yaml_file_owner(records, art, tmp_path, [tmp_path / "src", *art.records]) is None
    # a path no key of the YAML holds
    assert yaml_file_owner(said.replace("other", "third"), art, tmp_path, []) is None


def test_a_process_that_died_in_compiled_code_with_no_frame_of_the_run_is_the_hosts_or_runtimes():
    said = ("plugin does not build on meta: probe module_tree was killed by SIGSEGV (exit -11) without a result: a "
            "segmentation fault in compiled code of the runtime; its last error line: Fatal Python error: "
            "Segmentation fault\n\nCurrent thread 0x00007f3a (most recent call first):\n  <no Python frame>\n")
    verdict = context_owner(said, ART)
    assert verdict.owner == "environment" and verdict.rule == "host"
    # with a frame of the run's own code on the dumped stack, that frame decides
    in_plugin = said.replace("  <no Python frame>", '  File "/runs/x/worktree/mindspeed_mm/fsdp/models/tiny_vl/'
                                                  'modeling_tiny_vl.py", line 31 in forward')
    assert context_owner(in_plugin, ART).owner == "model"


def test_a_library_the_loader_cannot_map_is_the_hosts_limit():
    said = ("plugin does not build on meta: ImportError: /opt/envs/mm/lib/python3.11/site-packages/torch/lib/"
            "libtorch_cpu.so: failed to map segment from shared object (raised in /opt/envs/mm/lib/python3.11/"
            "importlib/__init__.py:126 in import_module)")
    verdict = context_owner(said, ART)
    assert verdict.owner == "environment" and "failed to map segment" in verdict.reason
    tls = "ImportError: /usr/lib/aarch64-linux-gnu/libgomp.so.1: cannot allocate memory in static TLS block"
    assert context_owner(f"plugin does not build on meta: {tls}", ART).owner == "environment"


def test_a_remedy_that_sets_a_key_the_yaml_has_at_another_level_is_the_yamls():
    art = Artifacts(config=("c.yaml",), yaml_keys=yaml_keys({"data": {"dataset_param": {
        "template": "qwen2vl", "basic_parameters": {"cutoff_len": 256}}}}))
    line = ("data settings: the same check passes with the YAML's data settings that differ from what this migration "
            "derives set as derived: set `data.dataset_param.basic_parameters.template` to 'qwen2vl' (it is not set "
            "there) in c.yaml")
    assert gate_remedy_owner(line, art).owner == "config"
    # a key in no section of the YAML is no remedy of its own
    assert gate_remedy_owner(line.replace("data.dataset_param.basic_parameters", "other.section"), art) is None
