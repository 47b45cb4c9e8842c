"""The stand-in trainer re-ties a tied embedding pair after the meta-device materialisation, as the real trainer's
``get_model`` does (``retie_embeddings`` from ``fsdp/checkpoint/utils.py``): ``to_empty_if_needed`` gives every
parameter its own storage, so without the re-tie ``lm_head`` would train apart from ``embed_tokens``."""
from types import SimpleNamespace

import pytest
import torch
from accelerate import init_empty_weights
from transformers import LlamaConfig, LlamaForCausalLM, LlavaConfig


def tiny_llama(tie: bool) -> LlamaForCausalLM:
    config = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=tie)
    with init_empty_weights():  # as ModelHub builds with init_model_with_meta_device
        return LlamaForCausalLM(config)


def tied(model) -> bool:
    return model.get_output_embeddings().weight is model.get_input_embeddings().weight


def test_materialising_splits_the_pair_and_retie_shares_one_parameter_again(mm):
    to_empty_if_needed = mm("mindspeed_mm.fsdp.utils.utils").to_empty_if_needed
    retie_embeddings = mm("mindspeed_mm.fsdp.checkpoint.utils").retie_embeddings
    model = tiny_llama(tie=True)  # (transformers 5 ties at load, not at a bare build: the build may be untied too)
    to_empty_if_needed(model, device="cpu")
    assert not tied(model)  # two storages after the materialisation: what the re-tie is there for
    retie_embeddings(model)
    assert tied(model) and model.lm_head.weight.device.type == "cpu"
    assert isinstance(model.lm_head.weight, torch.nn.Parameter)
    # one parameter: an optimizer over model.parameters() sees it once, and both uses add to its gradient
    assert sum(p is model.lm_head.weight for p in model.parameters()) == 1


def test_an_untied_model_stays_untied(mm):
    to_empty_if_needed = mm("mindspeed_mm.fsdp.utils.utils").to_empty_if_needed
    retie_embeddings = mm("mindspeed_mm.fsdp.checkpoint.utils").retie_embeddings
    model = tiny_llama(tie=False)
    to_empty_if_needed(model, device="cpu")
    retie_embeddings(model)
    assert not tied(model)


class TwoLevel(torch.nn.Module):
    """A multimodal-shaped model: the tie flag at the top-level config and in its text config."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embed = torch.nn.Embedding(8, 4)
        self.head = torch.nn.Linear(4, 8, bias=False)

    def get_input_embeddings(self):
        return self.embed

    def get_output_embeddings(self):
        return self.head


@pytest.mark.parametrize("top,text,expect", [
    (True, True, True), (False, True, False), (True, False, False), (False, False, False)],
    ids=["both", "top-false", "text-false", "neither"])
def test_both_the_top_level_and_the_text_config_must_ask(mm, top, text, expect):
    retie_embeddings = mm("mindspeed_mm.fsdp.checkpoint.utils").retie_embeddings
    config = LlavaConfig(text_config={"model_type": "llama", "tie_word_embeddings": text})
    config.tie_word_embeddings = top
    assert config.get_text_config(decoder=True).tie_word_embeddings is text  # the level the re-tie reads
    model = TwoLevel(config)
    retie_embeddings(model)
    assert (model.head.weight is model.embed.weight) is expect


@pytest.mark.parametrize("config,expect", [
    (SimpleNamespace(tie_word_embeddings=True), True),  # no get_text_config: the config is its own text config
    (SimpleNamespace(), False),  # no flag at either level: nothing asks
    (SimpleNamespace(get_text_config=lambda decoder: SimpleNamespace(tie_word_embeddings=True)), True),
    (SimpleNamespace(tie_word_embeddings=True,
                     get_text_config=lambda decoder: SimpleNamespace(tie_word_embeddings=False)), False),
], ids=["flat", "absent-everywhere", "absent-at-top", "text-says-no"])
def test_a_flag_absent_at_one_level_counts_as_asking(mm, config, expect):
    retie_embeddings = mm("mindspeed_mm.fsdp.checkpoint.utils").retie_embeddings
    model = TwoLevel(config)
    retie_embeddings(model)
    assert (model.head.weight is model.embed.weight) is expect


def test_a_model_asking_for_the_tie_without_embedding_accessors_stops_as_the_real_trainer_does(mm):
    retie_embeddings = mm("mindspeed_mm.fsdp.checkpoint.utils").retie_embeddings

    class Custom(torch.nn.Module):  # a custom plugin keeping an HF config (tie defaults to True) and no accessors
        def __init__(self):
            super().__init__()
            self.config = SimpleNamespace(tie_word_embeddings=True)

    with pytest.raises(RuntimeError, match="Failed to tie input/output embeddings") as info:
        retie_embeddings(Custom())
    assert isinstance(info.value.__cause__, AttributeError)
    retie_embeddings(torch.nn.Linear(2, 2))  # no config at all: nothing to do


def test_get_model_reties_after_materialising_on_the_load_path(mm, monkeypatch):
    """Trainer.get_model itself: meta build, to_empty_if_needed, no init (training.load set, so init_weights cannot
    tie the pair by itself), then the re-tie."""
    trainer_mod = mm("mindspeed_mm.fsdp.train.trainer")
    built = tiny_llama(tie=True)
    monkeypatch.setattr(trainer_mod.ModelHub, "build", staticmethod(lambda *a: built))
    monkeypatch.setattr(trainer_mod, "get_device_type", lambda: "cpu")
    trainer = object.__new__(trainer_mod.Trainer)
    trainer.args = SimpleNamespace(model=None, features=None,
                                   training=SimpleNamespace(init_model_with_meta_device=True, load="/ckpt"))
    identity = SimpleNamespace(pre_fully_shard_apply=lambda m: m, post_fully_shard_apply=lambda m: m)
    trainer.features_applier, trainer.parallel_applier = identity, lambda m: m
    model = trainer.get_model()
    assert model is built and model.lm_head.weight.device.type == "cpu" and tied(model)
