"""Registries are read from the target's code: roles traced from the lookup or through call sites."""
from msmigrate.tools.megatron.registry import read_registry


def test_standin_registries_and_roles(megatron_standin):
    reg = read_registry(megatron_standin)
    assert reg.error is None and reg.files_read > 5
    assert {"qwen2vit", "qwen2_5_vit"} <= reg.ids_for("vision_encoder")
    assert reg.ids_for("vision_projector") >= {"lnmlp", "mlp"}
    # the text decoder's spec table is looked up as config.model_id: its role comes from the call chain
    assert "qwen2_5_lm" in reg.ids_for("text_decoder")
    enc = next(r for r in reg.registries if r.name == "VISION_ENCODER_MAPPINGS")
    assert enc.lookup == "config.vision_encoder.model_id"
    assert enc.components[0].target == "Qwen2VLViT" and enc.components[0].defined_in.endswith(".py:10")


def test_a_new_registered_component_is_seen(standin_copy):
    path = standin_copy / "mindspeed_mm/models/vision/vision_model.py"
    text = path.read_text().replace('"qwen2_5_vit": Qwen2VLViT,', '"qwen2_5_vit": Qwen2VLViT,\n    "my_vit": MyViT,')
    path.write_text(text + "\n\nclass MyViT:\n    pass\n")
    reg = read_registry(standin_copy)
    comp = next(c for r in reg.for_role("vision_encoder") for c in r.components if c.model_id == "my_vit")
    assert comp.target == "MyViT" and "vision_model.py" in comp.defined_in


def test_untraceable_role_stays_none(tmp_path):
    models = tmp_path / "mindspeed_mm/models"
    models.mkdir(parents=True)
    (models / "m.py").write_text("TABLE = {'a': int}\n\ndef pick(cfg):\n    return TABLE[cfg.model_id]\n")
    reg = read_registry(tmp_path)
    assert [(r.name, r.role, r.ids) for r in reg.registries] == [("TABLE", None, ["a"])]


def test_missing_models_folder_is_an_error(tmp_path):
    assert "not a folder" in read_registry(tmp_path).error
