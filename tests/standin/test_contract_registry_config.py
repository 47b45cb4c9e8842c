"""Registry, plugin import, config-parsing and pattern-matching contract of the stand-in (real messages)."""
import sys

import pytest



def test_import_without_non_megatron_fails(run_py, standin):
    res = run_py(standin, "import mindspeed_mm", env={"NON_MEGATRON": "false"})
    assert res.returncode != 0
    assert "ModuleNotFoundError: No module named 'megatron'" in res.stderr


def test_register_messages(mm):
    reg = mm("mindspeed_mm.fsdp.utils.register")
    r = reg.Register()

    @r.register("x")
    class Foo:
        pass

    assert r.get("x") is Foo
    with pytest.raises(KeyError) as e:
        r.register("x")(type("Bar", (), {}))
    assert e.value.args[0] == "ID 'x' is already registered to Foo."
    with pytest.raises(KeyError) as e:
        r.get("nope")
    assert e.value.args[0] == "ID 'nope' is not registered."


def test_import_plugin_success_and_swallowed_failure(mm, capsys):
    reg = mm("mindspeed_mm.fsdp.utils.register")
    reg.import_plugin(["mindspeed_mm/fsdp/models/qwen3vl", "mindspeed_mm/fsdp/models/does_not_exist"])
    out = capsys.readouterr().out
    assert "Successfully imported: mindspeed_mm.fsdp.models.qwen3vl" in out
    assert ("Import failed: mindspeed_mm.fsdp.models.does_not_exist. Error: No module named "
            "'mindspeed_mm.fsdp.models.does_not_exist'") in out
    # walk_packages imported the modeling module, so the id is registered
    assert reg.model_register.get("qwen3_vl").__name__ == "Qwen3VLForConditionalGeneration"
    with pytest.raises(KeyError, match="ID 'qwen3vl' is not registered."):
        reg.model_register.get("qwen3vl")


def test_submodule_import_error_propagates(mm, standin):
    pkg = standin / "mindspeed_mm/fsdp/models/broken_tmp"
    pkg.mkdir()
    try:
        (pkg / "__init__.py").write_text("")
        (pkg / "modeling_broken.py").write_text("import not_a_real_module_xyz\n")
        reg = mm("mindspeed_mm.fsdp.utils.register")
        with pytest.raises(ModuleNotFoundError, match="not_a_real_module_xyz"):
            reg.import_plugin(["mindspeed_mm.fsdp.models.broken_tmp"])
    finally:
        for f in pkg.iterdir():
            f.unlink() if f.is_file() else None
        import shutil
        shutil.rmtree(pkg)


def _parse(mm, monkeypatch, yaml_text, tmp_path, *cli):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml_text)
    monkeypatch.setattr(sys, "argv", ["trainer.py", str(cfg), *cli])
    cm = mm("mindspeed_mm.config.config_manager")
    args_mod = mm("mindspeed_mm.fsdp.params.argument")
    return cm.ConfigManager(config_class=args_mod.Arguments).load_and_parse()


def _example(standin):
    return (standin / "examples/qwen3vl/qwen3vl_config.yaml").read_text()


def test_example_parses_with_dynamic_fields(mm, monkeypatch, standin, tmp_path, capsys):
    args = _parse(mm, monkeypatch, _example(standin), tmp_path)
    out = capsys.readouterr().out
    assert "[INFO] Automatically registered YAML field: features.recompute (type: <class 'bool'>, value: True)" in out
    assert "============ Dynamic Fields ============" in out and "\n features.recompute\n" in out
    assert args.features.recompute is True and args.training.global_batch_size == 2
    assert args.model.attn_implementation == "sdpa" and args.parallel.fully_shard_parallel_size == 2


def test_unknown_section_and_misplaced_key(mm, monkeypatch, standin, tmp_path, capsys):
    text = _example(standin) + "trainnig:\n  lr: 0.1\n"
    text = text.replace("model:\n", "model:\n  loss_cfg_typo: 1\n", 1)
    _parse(mm, monkeypatch, text, tmp_path)
    out = capsys.readouterr().out
    assert "[WARNING] Field path 'trainnig' does not exist" in out
    assert "[INFO] Automatically registered YAML field: model.loss_cfg_typo (type: <class 'int'>, value: 1)" in out


@pytest.mark.parametrize("edit, expected", [
    (("    sampler_type: BaseRandomBatchSampler\n", ""),
     ["validation error for Arguments", "data.dataloader_param.sampler_type", "Field required"]),
    (("  attn_implementation: sdpa", "  attn_implementation: flash"),
     ["model.attn_implementation", "Input should be 'eager', 'sdpa', 'flash_attention_2', 'flash_attention_3' or "
      "'native-sparse'"]),
    (("  plugin:\n    - mindspeed_mm/fsdp/models/qwen3vl\n    - mindspeed_mm/fsdp/data/datasets/huggingface\n",
      "  plugin: mindspeed_mm/fsdp/models/qwen3vl\n"), ["training.plugin", "Input should be a valid list"]),
    (("      cutoff_len: 256", "      cutoff_len: abc"), ["Input should be a valid integer"]),
])
def test_validation_errors(mm, monkeypatch, standin, tmp_path, capsys, edit, expected):
    text = _example(standin)
    assert edit[0] in text
    exc = mm("mindspeed_mm.config.exception")
    with pytest.raises(exc.ConfigValidationError, match="Configuration loading failed"):
        _parse(mm, monkeypatch, text.replace(edit[0], edit[1]), tmp_path)
    out = capsys.readouterr().out
    assert "[ERROR] Configuration loading failed: " in out
    for piece in expected:
        assert piece in out


def test_missing_data_section(mm, monkeypatch, standin, tmp_path, capsys):
    text = _example(standin)
    text = text[:text.index("data:\n")] + text[text.index("model:\n"):].replace("*HF_MODEL_LOAD_PATH", "x")
    exc = mm("mindspeed_mm.config.exception")
    with pytest.raises(exc.ConfigValidationError):
        _parse(mm, monkeypatch, text, tmp_path)
    out = capsys.readouterr().out
    assert "1 validation error for DataSetArguments" in out and "dataset_type" in out


def test_yaml_syntax_and_cli_override(mm, monkeypatch, standin, tmp_path, capsys):
    exc = mm("mindspeed_mm.config.exception")
    with pytest.raises(exc.ConfigValidationError, match=r"YAML parsing failed: .*cfg.yaml - "):
        _parse(mm, monkeypatch, "a: [x.{*}]\n", tmp_path)
    with pytest.raises(exc.ConfigValidationError,
                       match="Command-line argument 'training' is not defined in the configuration class."):
        _parse(mm, monkeypatch, _example(standin), tmp_path, "training.train_iters=5")


def test_env_read_during_parsing(run_py, standin):
    code = ("import sys; sys.argv=['t.py','examples/qwen3vl/qwen3vl_config.yaml']\n"
            "from mindspeed_mm.config.config_manager import ConfigManager\n"
            "ConfigManager().load_and_parse()")
    res = run_py(standin, code, env={"LOCAL_RANK": None, "RANK": None, "WORLD_SIZE": None})
    assert res.returncode != 0
    assert "int() argument must be a string" in res.stdout + res.stderr


def test_module_name_match_semantics(mm):
    m = mm("mindspeed.fsdp.utils.str_match").module_name_match
    assert m("model.visual.blocks.{*}", "model.visual.blocks.12")
    assert not m("model.visual.blocks.{*}", "model.visual.blocks")
    assert not m("model.visual.blocks.{*}", "model.visual.blocks.0.attn")
    assert not m("visual.blocks.{*}", "model.visual.blocks.0")
    assert m("*.blocks.{*}", "model.visual.blocks.0")
    assert m("model.layers.{0-3}", "model.layers.3") and not m("model.layers.{0-3}", "model.layers.4")
    assert m("*", "") and m("lm_hea?", "lm_head") and not m("model.visual", "model.visual.merger")
    with pytest.raises(ValueError, match="Unrecognized brace pattern: x"):
        m("model.{x}", "model.a")


def test_no_cpu_comm_backend(mm):
    device = mm("mindspeed_mm.fsdp.utils.device")
    assert device.get_device_type() == "cpu"
    with pytest.raises(RuntimeError, match="No available distributed communication backend found on device type cpu."):
        device.get_dist_comm_backend()
