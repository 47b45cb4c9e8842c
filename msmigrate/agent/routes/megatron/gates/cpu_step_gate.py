"""Megatron route, the training slot's CPU preflight on a real checkout: when the target runtime can build the model
here (tools/megatron/cpu_preflight.py ``real_build_readiness``: megatron.core imports under msmigrate's CPU shim),
the delivered weight conversion runs (the target's own converter on the source's folder, one rank) and then the real
step (tools/megatron/real_step.py: the delivered model built by the target's ``model_provider``, the conversion's
output loaded strictly, one real batch forward with the source's logits compared, backward).

``cpu_preflight_record`` returns None where the runtime cannot build the model (the project's stand-in, a checkout
without ``megatron/``): the slot launches as before. Otherwise a record of what ran: passed when the conversion and the
step both passed; a step that needs a torch_npu kernel the shim has no CPU reference for is ``needs_accelerator``
naming that kernel; any other failure (a model JSON that does not build, a checkpoint that does not load strictly,
logits off the source's) fails, with the problems as failure text for the repair loop.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from msmigrate.agent.gates.evidence import evidence_item
from msmigrate.tools.megatron.convert_command import conversion_command
from msmigrate.tools.megatron.cpu_preflight import real_build_readiness, run_conversion
from msmigrate.tools.megatron.launch_script import parse_launch_script
from msmigrate.tools.megatron.real_step import RealStep, real_step

CONVERSION_TIMEOUT_S = 900.0
STEP_TIMEOUT_S = 1200.0


def data_parity_summary(dp: dict[str, Any] | None) -> str:
    """The batch data parity in a clause (probes/_batch_data_parity.py; only a passed one reaches a passed summary)."""
    if not dp or dp.get("error") or not dp.get("passed"):
        return "data parity of get_batch's batch: not passed"
    cut = dp.get("same_text_retokenized_from")
    equal = "equal" if cut is None else f"equal up to {cut}, the same text cut differently from there"
    return (f"get_batch's batch vs the source's chat template + processor on record {dp.get('record')}: "
            f"{dp.get('tokens')} ids {equal} ({dp.get('media_tokens')} media tokens, source "
            f"{dp.get('source_media_tokens')}), {dp.get('trained')} trained positions all in the source's answer "
            f"spans ({dp.get('label_convention')} labels, {dp.get('padding_removed')} padding positions removed)")


def step_summary(res: RealStep) -> str:
    f = res.facts
    load, parity = f.get("load") or {}, f.get("parity") or {}
    return (f"{f.get('model_class')} built by the target's model_provider; {load.get('tensors')} converted tensors "
            f"loaded strictly; logits vs the source's: max |diff| {parity.get('max_abs_diff', float('nan')):.3g} over "
            f"{parity.get('positions')} positions (tolerance {parity.get('tolerance', float('nan')):.3g}); "
            f"{data_parity_summary(f.get('data_parity'))}; backward: "
            f"{f.get('grads_nonzero')} of {f.get('params_with_grad')} trainable tensors got a nonzero gradient"
            + (f"; torch_npu kernels run as CPU references: {', '.join(dict.fromkeys(k.split('(')[0] for k in res.kernels))}"
               if res.kernels else ""))


def cpu_preflight_record(runtime_python: str, target: Path, source: Path | None, plan: dict[str, Any],
                         work_dir: Path, *, probe_timeout: float = 300.0) -> dict[str, Any] | None:
    ready = real_build_readiness(runtime_python, target, timeout=probe_timeout)
    if not ready.ok:
        return None
    meg = plan.get("megatron") or {}
    script, model_json = meg.get("script_path") or plan["script_path"], meg.get("model_json_path") or plan[
        "model_json_path"]
    tp = int((plan.get("parallel") or {}).get("tp") or 1)
    base = {"gate": "cpu_preflight", "backend": "megatron", "readiness": ready.to_dict(), "needs_accelerator": False}
    if source is None:
        return {**base, "passed": False, "summary": "CPU preflight not run: no source folder to convert",
                "evidence": [], "failure_text": "no source folder"}
    conv = conversion_command(target, plan.get("converter"), model_json, script, source, tp,
                              plan.get("converter_output"))
    t0 = time.time()
    ran = run_conversion(runtime_python, target, conv, Path(work_dir) / "mm", timeout=CONVERSION_TIMEOUT_S)
    ev = [evidence_item("weight conversion (target's converter, one rank)", ran.command or "not formed",
                        ran.returncode, t0, time.time(), ran.error or ran.log_tail, ran.to_dict())]
    rec = {**base, "conversion_run": ran.to_dict(), "evidence": ev}
    if not ran.ok:
        why = f"the delivered weight conversion did not run through: {ran.error}"
        return {**rec, "passed": False, "summary": why, "failure_text": "\n".join([why, ran.log_tail])}
    launch = parse_launch_script((Path(target) / script).read_text(encoding="utf-8"))
    t1 = time.time()
    res = real_step(runtime_python, target, launch.flags, load=Path(ran.mm_dir), source=source,
                    timeout=STEP_TIMEOUT_S)
    problems = [res.error] if res.error else res.problems
    ev.append(evidence_item("real Megatron step on the CPU (build, strict load, forward parity, backward)",
                            ["megatron_real_step", script], 0 if res.ok else 1, t1, time.time(), "\n".join(problems),
                            {**res.facts, "kernels": res.kernels, "missing_kernel": res.missing_kernel,
                             "changed": {k: list(v) for k, v in res.changed.items()}}))
    rec["real_step"] = {"ok": res.ok, "problems": problems, "kernels": res.kernels,
                        "missing_kernel": res.missing_kernel, "changed": res.changed}
    converted = f"converted with `{ran.command}`"
    if res.ok:
        return {**rec, "passed": True, "summary": f"{converted}; {step_summary(res)}", "failure_text": ""}
    if res.missing_kernel:
        why = (f"the real step needs {res.missing_kernel}, for which msmigrate's CPU shim has no "
               f"reference: {'; '.join(problems)}")
        return {**rec, "passed": False, "needs_accelerator": why, "summary": f"{converted}; {why}",
                "failure_text": ""}
    return {**rec, "passed": False, "summary": f"{converted}; the real step failed: {'; '.join(problems[:4])}",
            "failure_text": "\n".join(problems)}


def with_preflight(pre: dict[str, Any], launch: dict[str, Any], script: str) -> dict[str, Any]:
    """The slot's record: the preflight's evidence first, then the launch's; passes only when both did (a launch not
    run leaves the slot not passed, and says what was not run)."""
    ran = f"ran on the CPU: {pre['summary']}"
    not_run = launch.get("needs_accelerator")
    why = (not_run if isinstance(not_run, str) else str(launch.get("summary") or "")).removeprefix("not run: ")
    summary = (f"{ran}; not run: {why} (the "
               f"delivered launch: bash {script})" if not_run
               else f"{ran}; launch: {launch.get('summary')}")
    return {**launch, "passed": bool(pre["passed"] and launch.get("passed")), "summary": summary,
            "cpu_preflight": {k: pre[k] for k in ("readiness", "conversion_run", "real_step", "summary") if k in pre},
            "evidence": pre["evidence"] + list(launch.get("evidence") or [])}
