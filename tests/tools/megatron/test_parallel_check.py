"""Parallelism arithmetic on configs shaped like real ones (numbers from public model cards, not the fixtures)."""

from __future__ import annotations

import json

from msmigrate.tools.megatron.parallel_check import (ParallelSizes, check_parallel, check_parallel_for_source,
                                                     text_config)

# a composite VLM config: the LLM sits under text_config (Qwen2.5-VL-7B-like sizes: 28 heads, 4 KV heads, 28 layers)
VLM = {"model_type": "x_vl", "vision_config": {"num_attention_heads": 16, "depth": 32},
       "text_config": {"num_attention_heads": 28, "num_key_value_heads": 4, "num_hidden_layers": 28}}
# a plain decoder with multi-head attention (no num_key_value_heads): 40 heads, 40 layers
PLAIN = {"num_attention_heads": 40, "num_hidden_layers": 40}
# InternVL-style: the LLM under llm_config (GQA 32 / 8, 48 layers)
LLM_CFG = {"llm_config": {"num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 48}}


def test_text_config_is_the_language_model_part():
    assert text_config(VLM)["num_hidden_layers"] == 28
    assert text_config(LLM_CFG)["num_key_value_heads"] == 8
    assert text_config(PLAIN) is PLAIN


def test_fitting_sizes_pass_and_derive_dp_and_grad_accum():
    r = check_parallel(VLM, ParallelSizes(tp=4, pp=2, cp=1, world_size=16, micro_batch_size=2, global_batch_size=32))
    assert r.ok, r.problems
    assert r.facts["dp"] == 2 and r.facts["grad_accum"] == 8


def test_kv_heads_not_divisible_by_tp():
    r = check_parallel(VLM, ParallelSizes(tp=7))  # 28 heads divide by 7, 4 KV heads do not
    assert not r.ok
    assert any("num_key_value_heads 4" in p for p in r.problems)
    assert not any("num_attention_heads 28 is not divisible" in p for p in r.problems)


def test_heads_not_divisible_by_tp_without_gqa():
    r = check_parallel(PLAIN, ParallelSizes(tp=3))
    assert any("num_attention_heads 40 is not divisible by tp 3" in p for p in r.problems)


def test_layers_by_pp_times_vpp():
    assert check_parallel(LLM_CFG, ParallelSizes(pp=4, vpp=3)).ok  # 48 / 12
    r = check_parallel(LLM_CFG, ParallelSizes(pp=4, vpp=5))
    assert any("pp x vpp = 4 x 5 = 20" in p for p in r.problems)
    assert any("vpp > 1 needs pp > 1" in p for p in check_parallel(LLM_CFG, ParallelSizes(vpp=2)).problems)


def test_world_size_and_batch_arithmetic():
    r = check_parallel(PLAIN, ParallelSizes(tp=2, pp=2, cp=2, world_size=12))
    assert any("world size 12 is not divisible by tp x pp x cp = 8" in p for p in r.problems)
    r = check_parallel(PLAIN, ParallelSizes(tp=2, world_size=8, dp=3))
    assert any("!= tp x pp x cp x dp" in p for p in r.problems)
    r = check_parallel(PLAIN, ParallelSizes(tp=2, world_size=8, micro_batch_size=3, global_batch_size=20))
    assert any("global batch 20 is not divisible by micro x dp = 3 x 4" in p for p in r.problems)
    r = check_parallel(PLAIN, ParallelSizes(world_size=4, micro_batch_size=1, global_batch_size=16, grad_accum=2))
    assert any("!= micro x dp x grad-accum" in p for p in r.problems)


def test_unreadable_config_is_an_error_not_a_pass(tmp_path):
    assert check_parallel({"model_type": "x"}, ParallelSizes()).error
    assert check_parallel_for_source(tmp_path, ParallelSizes()).error
    (tmp_path / "config.json").write_text(json.dumps(VLM))
    assert check_parallel_for_source(tmp_path, ParallelSizes(tp=2)).ok
