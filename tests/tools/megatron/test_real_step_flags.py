"""The one-process CPU step's flags and verdict (tools/megatron/real_step.py), without a runtime: what changes from
the launch is named, the parity tolerance follows the compute dtype, and a step that proved nothing does not pass."""

from __future__ import annotations

from msmigrate.tools.megatron.real_step import parity_tolerance, problems_of, step_flags

LAUNCH = {"--tensor-model-parallel-size": "2", "--pipeline-model-parallel-size": "1", "--micro-batch-size": "1",
          "--global-batch-size": "8", "--bf16": True, "--load": "ckpt/mm_path/m", "--distributed-backend": "nccl",
          "--mm-model": "examples/m/model.json", "--num-workers": "8", "--context-parallel-size": "1"}


def test_step_flags_name_every_change_and_keep_the_rest():
    argv, changed = step_flags(LAUNCH, "/tmp/s")
    assert "--bf16" in argv and argv[argv.index("--mm-model") + 1] == "examples/m/model.json"
    assert argv[argv.index("--tensor-model-parallel-size") + 1] == "1"
    assert argv[argv.index("--global-batch-size") + 1] == "1" and "--load" not in argv
    assert set(changed) == {"--tensor-model-parallel-size", "--global-batch-size", "--distributed-backend",
                            "--num-workers", "--save", "--load"}
    assert changed["--tensor-model-parallel-size"] == ("2", "1")


def test_parity_tolerance_follows_the_dtype():
    assert parity_tolerance(["torch.bfloat16"], 0.5) > parity_tolerance(["torch.float32"], 0.5) * 1000
    assert parity_tolerance(["torch.bfloat16"], 10.0) == 10 * parity_tolerance(["torch.bfloat16"], 1.0)


def _ok(**over):
    base = {"finite": True, "params_with_grad": 3, "grads_finite": True, "grads_nonzero": 3, "dtypes": ["torch.bfloat16"]}
    return {**base, **over}


def test_verdict():
    assert problems_of(_ok()) == []
    assert problems_of(_ok(finite=False)) == ["the logits are not finite"]
    assert "no trainable" in problems_of(_ok(params_with_grad=0))[0]
    assert "every gradient is zero" in problems_of(_ok(grads_nonzero=0))[0]
    near = {"max_abs_diff": 0.0046, "ref_abs_max": 0.66, "positions": 46}
    data = {"passed": True, "problems": [], "record": 0}
    assert problems_of(_ok(parity=near, data_parity=data)) == []
    # with the source given, the batch's data parity must have run and passed
    assert problems_of(_ok(parity=near)) == ["data parity of get_batch's batch vs the source's processor was not run"]
    assert "could not run: no records" in problems_of(_ok(parity=near, data_parity={"passed": False,
                                                                                    "error": "no records"}))[0]
    wrong = {"passed": False, "record": 1, "problems": ["3 trained tokens outside the assistant turns"]}
    assert problems_of(_ok(parity=near, data_parity=wrong)) == [
        "data parity (get_batch's batch vs the source's chat template + processor, record 1): 3 trained tokens "
        "outside the assistant turns"]
    far = {"max_abs_diff": 0.5, "ref_abs_max": 0.66, "positions": 46}
    assert "differ from the source" in problems_of(_ok(parity=far))[0]
    assert "not measured" in problems_of(_ok(parity={"error": "logits [1, 4] vs [1, 5]"}))[0]
