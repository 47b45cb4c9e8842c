"""HF -> Megatron -> HF layout round trip: passes for the grouped QKV order, fails on a wrong head order even when
the wrong fusion's own inverse would undo it, and fails on an inverse that swaps tensors."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from msmigrate.tools.megatron.weight_roundtrip import converter_roundtrip
from msmigrate.tools.megatron import PROBES_DIR

torch = pytest.importorskip("torch")


@pytest.fixture
def probe():
    spec = importlib.util.spec_from_file_location("megatron_qkv_roundtrip", PROBES_DIR / "megatron_qkv_roundtrip.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_round_trip_in_the_runtime_reads_head_counts_from_the_config(tmp_path):
    # 12 heads over 4 KV heads under text_config, no attention bias (a shape the defaults do not have)
    (tmp_path / "config.json").write_text(json.dumps(
        {"text_config": {"num_attention_heads": 12, "num_key_value_heads": 4, "attention_bias": False}}))
    r = converter_roundtrip(sys.executable, tmp_path, layers=3, head_dim=4)
    assert r.error is None and r.ok, r.problems
    assert (r.facts["heads"], r.facts["kv_heads"], r.facts["bias"], r.facts["layers"]) == (12, 4, False, 3)
    assert r.facts["tensors"] == 3 * 7 and r.facts["megatron_tensors"] == 3 * 4


@pytest.mark.parametrize("heads,kv", [(6, 6), (8, 1), (10, 5)])  # multi-head, multi-query, grouped
def test_grouped_layout_round_trips(probe, heads, kv):
    out = probe.check(layers=1, heads=heads, kv=kv, head_dim=3, bias=True, seed=7)
    assert out["ok"], out["problems"]


def test_plain_concatenation_is_caught_although_it_round_trips(probe, monkeypatch):
    """q|k|v stacked whole (the HF ViT order) with its own inverse: same tensors back, wrong Megatron layout."""
    monkeypatch.setattr(probe, "fuse_qkv", lambda q, k, v, kv: torch.cat([q, k, v]))

    def unfuse(qkv, kv, q_rows, kv_rows):
        return tuple(qkv.split([q_rows * kv, kv_rows * kv, kv_rows * kv]))

    monkeypatch.setattr(probe, "unfuse_qkv", unfuse)
    out = probe.check(layers=2, heads=4, kv=2, head_dim=2)
    assert not out["ok"]
    assert out["problems"][0].startswith("layer 0, tp rank 0: rows") and "k head 0" in out["problems"][0]
    assert not any("differs after" in p for p in out["problems"])  # the round trip alone would have passed


def test_reversed_heads_inside_a_group_are_caught(probe, monkeypatch):
    right = probe.fuse_qkv

    def reversed_q(q, k, v, kv):
        per = q.shape[0] // kv
        head_dim = k.shape[0] // kv
        heads = list(q.split(head_dim))
        flipped = [h for g in range(kv) for h in reversed(heads[g * per // head_dim:(g + 1) * per // head_dim])]
        return right(torch.cat(flipped), k, v, kv)

    monkeypatch.setattr(probe, "fuse_qkv", reversed_q)
    out = probe.check(layers=1, heads=4, kv=2, head_dim=2)
    assert not out["ok"] and "q head 0" in out["problems"][0]


def test_an_inverse_that_swaps_k_and_v_fails_the_round_trip(probe, monkeypatch):
    right = probe.unfuse_qkv
    monkeypatch.setattr(probe, "unfuse_qkv", lambda *a: (lambda q, k, v: (q, v, k))(*right(*a)))
    out = probe.check(layers=1, heads=4, kv=2, head_dim=2)
    assert not out["ok"] and any("k_proj.weight differs" in p for p in out["problems"])


def test_head_counts_that_do_not_group_are_an_error(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"num_attention_heads": 6, "num_key_value_heads": 4}))
    r = converter_roundtrip(sys.executable, tmp_path)
    assert not r.ok and "not a multiple" in (r.error or "")


def test_each_tp_rank_holds_its_own_kv_groups(probe, tmp_path):
    out = probe.check(layers=2, heads=8, kv=4, head_dim=2, tp=2)
    assert out["ok"] and out["layers_checked"] == 2 and out["tp"] == 2, out["problems"]
    # a fusion whose groups come out in reverse: lossless with its inverse, and rank 0 holds groups 2, 3
    right_fuse, right_unfuse = probe.fuse_qkv, probe.unfuse_qkv
    probe.fuse_qkv = lambda q, k, v, kv: torch.cat(list(reversed(right_fuse(q, k, v, kv).chunk(kv))))
    probe.unfuse_qkv = lambda qkv, kv, *a: right_unfuse(torch.cat(list(reversed(qkv.chunk(kv)))), kv, *a)
    bad = probe.check(layers=1, heads=8, kv=4, head_dim=2, tp=2)  # the fixture loads a fresh module per test
    assert not bad["ok"] and bad["problems"][0].startswith("layer 0, tp rank 0: rows 0..1"), bad["problems"]


def test_kv_heads_that_do_not_split_over_tp_check_nothing_and_fail(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"num_attention_heads": 4, "num_key_value_heads": 1}))
    r = converter_roundtrip(sys.executable, tmp_path, tp=2)
    assert not r.ok and "does not divide by tp 2" in r.problems[0] and r.facts["layers_checked"] == 0
    assert converter_roundtrip(sys.executable, tmp_path, tp=1).ok
