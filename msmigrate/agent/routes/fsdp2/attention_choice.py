"""``model.attn_implementation`` chosen among the implementations the source's model classes support.

transformers refuses a requested implementation at build time on every PreTrainedModel that does not declare it
(``_supports_sdpa``, ``_supports_flash_attn``): a YAML asking for ``sdpa`` of a class that lacks the flag passes the
schema checks and fails the first training launch. The support is read from the built plugin class (the module-tree
probe's ``attention_support``: the delivered classes, flags the model phase added included), else from the source's
remote code by AST (the plan's ``attention_flags_missing``).

A declared implementation must also be runnable where the run launches: the env probe asks the target runtime's own
transformers which ones it can run on the device G0 found (``runtime["attention"]``: flash attention needs the
flash-attn package with a CUDA device, or torch_npu). The gates' CPU launches replace the implementation
(``launcher/command.py``), so without this check a YAML asking for one this runtime lacks passes every gate and fails
the user's first launch of the delivered script."""

from __future__ import annotations

from typing import Any

ATTN_PATH = "model.attn_implementation"
FRAMEWORK_DEFAULT = "flash_attention_2"  # what the target's ModelArguments uses when the key is absent
PREFERRED = ("sdpa", "eager")  # eager needs no flag: every class has it


def lacking(plan: dict[str, Any], tree: dict[str, Any] | None) -> tuple[dict[str, list[str]], str]:
    """(implementation -> the classes that do not declare it, where that was read)."""
    support = (tree or {}).get("attention_support")
    if isinstance(support, dict):
        return dict(support.get("lacks") or {}), f"the built class {(tree or {}).get('model_class') or ''}".strip()
    return dict(plan.get("attention_flags_missing") or {}), "the source's remote code"


def supported(plan: dict[str, Any], tree: dict[str, Any] | None) -> list[str]:
    lacks, _ = lacking(plan, tree)
    return [impl for impl in ("eager", "sdpa", "flash_attention_2") if impl not in lacks]


def launch_host_attention(runtime: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the runtime can run, where that speaks for the delivered launch: on a host with an accelerator (the
    user's training host). A CPU-only host is where the gates run, not where the delivered script trains (the gates'
    CPU launches replace the implementation anyway): nothing is ruled out there, so an NPU user still gets the
    example's flash attention."""
    runtime = runtime or {}
    device = runtime.get("device")
    device = device.get("kind") if isinstance(device, dict) else device
    return runtime.get("attention") if device in ("npu", "cuda") else None


def unavailable(runtime_attention: dict[str, Any] | None) -> list[str]:
    """The implementations the target runtime reported it cannot run ([] when it reported nothing)."""
    return [impl for impl, ok in (runtime_attention or {}).items() if ok is False]


def choose_attention(plan: dict[str, Any], tree: dict[str, Any] | None, current: Any,
                     runtime_attention: dict[str, Any] | None = None) -> tuple[str, str | None]:
    """(the implementation the draft writes, why it is not ``current``): ``current`` (the example's) when the source
    supports it and the runtime can run it, else the first of sdpa / eager that both allow."""
    lacks, where = lacking(plan, tree)
    missing = unavailable(runtime_attention)
    if isinstance(current, str) and current not in lacks and current not in missing:
        return current, None
    pick = next((impl for impl in PREFERRED if impl not in lacks and impl not in missing), "eager")
    if isinstance(current, str) and current not in lacks:
        return pick, (f"{ATTN_PATH} {pick} instead of the similar example's {current!r}: the target runtime cannot "
                      f"run {current} on the device the env probe found")
    if current is None:
        return pick, (None if pick == PREFERRED[0] else
                      f"{ATTN_PATH} {pick}: {', '.join(lacks['sdpa'])} declare no sdpa support ({where})")
    return pick, (f"{ATTN_PATH} {pick} instead of the similar example's {current!r}: "
                  f"{', '.join(lacks[current])} declare no {current} support ({where})")


def attention_findings(cfg: dict[str, Any], plan: dict[str, Any], tree: dict[str, Any] | None,
                       runtime: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """G3: the YAML asks for an implementation a class of the source's model does not declare, or one the target
    runtime cannot run on the device G0 found (``runtime``: the env probe's result)."""
    model = cfg.get("model") if isinstance(cfg.get("model"), dict) else {}
    asked = model.get("attn_implementation", FRAMEWORK_DEFAULT)
    lacks, where = lacking(plan, tree)
    absent = "" if "attn_implementation" in model else " (the target's default: the key is absent)"
    if isinstance(asked, str) and asked not in lacks and asked in unavailable(launch_host_attention(runtime)):
        device = (runtime or {}).get("device")
        device = device.get("kind") if isinstance(device, dict) else device
        runnable = [impl for impl, ok in runtime["attention"].items() if ok and impl not in lacks]
        return [{"severity": "error", "code": "attn-unavailable", "path": ATTN_PATH, "value": asked,
                 "message": f"attn_implementation {asked!r}{absent} cannot run in the target runtime on its device "
                            f"({device or 'unknown'}): its transformers reports {asked} unavailable (flash attention "
                            f"needs the flash-attn package with a CUDA device, or torch_npu on an NPU); the delivered "
                            f"launch script would fail building the model (the gates' CPU launches replace it, so "
                            f"no launch shows it); runnable here: {', '.join(runnable)}",
                 "suggestion": f"set {ATTN_PATH} to one of {', '.join(runnable)}"}]
    if not isinstance(asked, str) or asked not in lacks:
        return []
    return [{"severity": "error", "code": "attn-unsupported", "path": ATTN_PATH, "value": asked,
             "message": f"attn_implementation {asked!r}{absent} is not supported by the source's model: "
                        f"{', '.join(lacks[asked])} declare no {asked} support (read from {where}); transformers "
                        f"refuses it when the model is built; the source supports {', '.join(supported(plan, tree))}",
             "suggestion": f"set {ATTN_PATH} to one of {', '.join(supported(plan, tree))}"}]
