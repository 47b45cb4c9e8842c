"""Flags of a launch script against add_argument definitions read by AST (a made-up parser, not the real one)."""

from __future__ import annotations

from msmigrate.tools.megatron.arg_definitions import argument_definitions, check_script_flags, script_flags

PARSER = '''
def extra(parser):
    g = parser.add_argument_group(title="x")
    g.add_argument("--mm-model", type=str, default="")
    g.add_argument('--lora-r', '-r', type=int)
    name = "--not-literal"
    g.add_argument(name)
'''
SCRIPT = '''#!/bin/bash
# --commented-out flag
ARGS="
    --mm-model model.json \\
    --lora-r 8 \\
    --tensor-model-parallel-size ${TP}   # trailing --comment
"
torchrun --nproc_per_node 2 pretrain_vlm.py $ARGS --mm-model=other.json
'''


def test_literal_flags_are_definitions(tmp_path):
    (tmp_path / "args.py").write_text(PARSER)
    (tmp_path / "broken.py").write_text("def (:\n")
    defs, n = argument_definitions([tmp_path])
    assert set(defs) == {"--mm-model", "--lora-r"} and n == 2
    assert defs["--mm-model"].endswith("args.py:4")


def test_script_flags_skip_comments():
    assert script_flags(SCRIPT) == ["--lora-r", "--mm-model", "--nproc_per_node", "--tensor-model-parallel-size"]


def test_undefined_flags_are_unverified_not_passed(tmp_path):
    (tmp_path / "args.py").write_text(PARSER)
    (tmp_path / "run.sh").write_text(SCRIPT)
    r = check_script_flags(tmp_path / "run.sh", [tmp_path / "args.py"])
    assert r.error is None and set(r.defined) == {"--mm-model", "--lora-r"}
    assert r.unverified == ["--nproc_per_node", "--tensor-model-parallel-size"]
    assert check_script_flags(tmp_path / "run.sh", [tmp_path / "missing_dir"]).error
    assert check_script_flags(tmp_path / "nope.sh", [tmp_path]).error
