"""Converters are found in the target's checkpoint/ tree and matched to a source by the HF config module their
file imports."""
from msmigrate.tools.megatron.converters import converter_candidates


def test_standin_converter_matches_its_architecture(megatron_standin):
    r = converter_candidates(megatron_standin, "qwen2_5_vl")
    assert r.error is None and r.best == "Qwen2_5_VLConverter"
    assert r.matches[0].file == "checkpoint/vlm_model/converters/qwen2_5vl.py"
    assert converter_candidates(megatron_standin, "llava").matches == []


def test_specific_files_rank_first_and_abstract_bases_are_skipped(tmp_path):
    conv = tmp_path / "checkpoint" / "c"
    conv.mkdir(parents=True)
    (conv / "base.py").write_text("from abc import abstractmethod\nclass Converter:\n    @staticmethod\n"
                                  "    @abstractmethod\n    def hf_to_mm(cfg): ...\n    @staticmethod\n"
                                  "    @abstractmethod\n    def mm_to_hf(cfg): ...\n")
    body = "    @staticmethod\n    def hf_to_mm(cfg): ...\n    @staticmethod\n    def mm_to_hf(cfg): ...\n"
    (conv / "a.py").write_text("from transformers.models.qwen2_vl import X\nfrom transformers.models.other import Y\n"
                               "class Wide(Converter):\n" + body)
    (conv / "b.py").write_text("class Narrow(Converter):\n" + body.replace("...", "from transformers.models.qwen2_vl "
                                                                          "import X", 1))
    r = converter_candidates(tmp_path, "qwen2_vl")
    assert [m.name for m in r.matches] == ["Narrow", "Wide"] and len(r.converters) == 2


def test_no_checkpoint_folder(tmp_path):
    assert "no checkpoint/" in converter_candidates(tmp_path, "x").error
