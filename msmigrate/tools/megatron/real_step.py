"""The delivered Megatron model on the real framework, on this machine (probe megatron_real_step): built by the
target's own ``model_provider`` from the launch script's flags and model JSON, the converted checkpoint loaded,
one batch of the real data pipeline forward and backward, and (with the source) its logits against the source's
on the same batch.

Without torch_npu the probe runs under msmigrate's CPU shim (``tools/megatron_cpu``). The shim prints which
torch_npu kernels the step went through (CPU references) and, where a path needs one it has no reference for, which
one: ``RealStep.kernels`` / ``RealStep.missing_kernel``, so a caller can say exactly what needs the NPU.

The launch's flags are kept except what a one-process CPU step must change, each named in ``RealStep.changed``:
sizes (TP/PP/CP 1, global batch = micro batch), the backend (gloo), ``--load`` (the caller's checkpoint, loaded by
the probe itself) and ``--save`` (nowhere in the checkout).
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.tools.megatron import PROBES_DIR
from msmigrate.tools.launcher.command import free_port
from msmigrate.tools.runtime import run_process

SHIM_SITE = Path(__file__).resolve().parents[1] / "megatron_cpu" / "site"
KERNEL_LINE = re.compile(r"\[msmigrate megatron-cpu\] kernel torch_npu\.(\w+)\(([^)]*)\)")
MISSING_LINE = re.compile(r"\[msmigrate megatron-cpu\] no CPU reference for (\S+)")
RESULT_MARKER = "MSMIGRATE_PROBE_RESULT "
ONE_PROCESS = {"--tensor-model-parallel-size": "1", "--pipeline-model-parallel-size": "1",
               "--context-parallel-size": "1", "--distributed-backend": "gloo", "--num-workers": "0"}


@dataclass
class RealStep:
    ok: bool = False
    facts: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)  # torch_npu kernels run as CPU references
    missing_kernel: str | None = None  # a torch_npu name the path needed that the shim has no CPU version of
    changed: dict[str, Any] = field(default_factory=dict)  # launch flags the one-process CPU step changed
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def step_flags(flags: dict[str, Any], save_dir: str) -> tuple[list[str], dict[str, Any]]:
    """(argv after pretrain_vlm.py, {flag: (launch value, step value)}) for one CPU process."""
    want = {**ONE_PROCESS, "--global-batch-size": str(flags.get("--micro-batch-size", "1")), "--save": save_dir}
    out, changed = dict(flags), {}
    for k, v in want.items():
        if str(out.get(k)) != v:
            changed[k] = (out.get(k), v)
        out[k] = v
    if "--load" in out:
        changed["--load"] = (out.pop("--load"), "loaded by the probe")
    argv: list[str] = []
    for k, v in out.items():
        argv += [k] if v is True else [k, str(v)]
    return argv, changed


def real_step(runtime_python: str, target: Path, flags: dict[str, Any], *, load: Path | None = None,
              source: Path | None = None, shim: bool = True, timeout: float = 1200.0) -> RealStep:
    with tempfile.TemporaryDirectory(prefix="msmigrate-real-step-") as save:
        argv, changed = step_flags(flags, save)
        cmd = [runtime_python, str(PROBES_DIR / "megatron_real_step.py"), "--target", str(Path(target).resolve()),
               "--flags", json.dumps(argv), "--port", str(free_port())]
        cmd += ["--load", str(load)] if load else []
        cmd += ["--source", str(source)] if source else []
        cmd += ["--cpu-shim", str(SHIM_SITE)] if shim else []
        out = run_process(cmd, cwd=target, timeout=timeout)
    log = out.stdout + out.stderr
    res = RealStep(changed=changed,
                   kernels=sorted({f"{m.group(1)}({m.group(2)})" for m in KERNEL_LINE.finditer(log)}))
    missing = MISSING_LINE.findall(log)
    res.missing_kernel = missing[0] if missing else None
    lines = [ln[ln.rindex(RESULT_MARKER) + len(RESULT_MARKER):] for ln in out.stdout.splitlines() if RESULT_MARKER in ln]
    if out.timed_out or not lines:
        res.error = (f"megatron_real_step timed out after {timeout:.0f}s" if out.timed_out
                     else f"megatron_real_step exited {out.returncode} without a result: {out.stderr[-1500:]}")
        return res
    payload = json.loads(lines[-1])
    res.facts = {k: v for k, v in payload.items() if k not in ("ok", "traceback")}
    if not payload.get("ok"):
        where = payload.get("stage") or "?"
        res.error = (f"{payload.get('exception', 'failed')} at {where}: {payload.get('message', '')}"
                     if payload.get("exception") else f"failed at {where}")
        load_facts = payload.get("load") or {}
        for key in ("missing", "unexpected", "wrong_shape"):
            if load_facts.get(key):
                res.problems.append(f"checkpoint {key}: {', '.join(load_facts[key][:6])}")
        return res
    res.problems += problems_of(payload)
    res.ok = not res.problems
    return res


# Machine epsilon of the dtype the delivered model computes in (the model JSON's params_dtype via the launch's
# --bf16/--fp16). The source runs in float32; the logits may differ by rounding accumulated over the layers, allowed
# as ULPS epsilons at the scale of the source's largest logit.
EPS = {"torch.bfloat16": 2.0 ** -8, "torch.float16": 2.0 ** -11, "torch.float32": 2.0 ** -23}
ULPS = 8


def parity_tolerance(dtypes: list[str], ref_abs_max: float) -> float:
    eps = max((EPS.get(d, EPS["torch.float32"]) for d in dtypes), default=EPS["torch.float32"])
    return ULPS * eps * max(ref_abs_max, 1.0)


def data_parity_problems(dp: dict[str, Any] | None) -> list[str]:
    """The batch data parity's verdict as problems (probes/_batch_data_parity.py): a comparison that did not run
    is a problem too, never a pass."""
    if dp is None:
        return ["data parity of get_batch's batch vs the source's processor was not run"]
    if dp.get("error"):
        return [f"data parity of get_batch's batch vs the source's processor could not run: {dp['error']}"]
    return [f"data parity (get_batch's batch vs the source's chat template + processor, record {dp.get('record')}): "
            f"{p}" for p in dp.get("problems") or []] or ([] if dp.get("passed") else ["data parity did not pass"])


def problems_of(payload: dict[str, Any]) -> list[str]:
    problems = []
    parity = payload.get("parity")
    if parity is not None:
        if parity.get("error"):
            problems.append(f"logit parity not measured: {parity['error']}")
        else:
            tol = parity_tolerance(payload.get("dtypes") or [], parity["ref_abs_max"])
            parity["tolerance"] = tol
            if not parity["max_abs_diff"] <= tol:
                problems.append(f"logits differ from the source's: max |diff| {parity['max_abs_diff']:.4g} over "
                                f"{parity['positions']} positions, tolerance {tol:.4g}")
    if not payload.get("finite"):
        problems.append("the logits are not finite")
    if not payload.get("params_with_grad"):
        problems.append("no trainable parameter received a gradient")
    elif not payload.get("grads_finite"):
        problems.append("a gradient is not finite")
    elif not payload.get("grads_nonzero"):
        problems.append("every gradient is zero")
    if payload.get("parity") is not None:  # the source was given: its processing of the batch's record is the oracle
        problems += data_parity_problems(payload.get("data_parity"))
    return problems
