"""Which training backend of MindSpeed-MM a migration targets: the FSDP2 plugin route or the Megatron route.

Evidence, not model names: the real FSDP2 backend rejects tensor parallelism (``ParallelArguments``: "Tensor
parallel size not supported yet") and has no pipeline stages, while it does context parallelism (Ulysses / ring).
So tp > 1 or pp > 1 (or vpp > 1) in the spec needs the Megatron route (pretrain_vlm.py); cp alone does not. The
user can force either. Model size is not a reason on its own: FSDP2 shards parameters, and any size threshold
would be a guess.

Both routes run in the same graph (same nodes, same gate slots G1..G6); the plan's ``backend`` picks the rules
phases (``agent/routes/megatron/rules``) and the gates (``route_gates``). The run still stops at the plan when the
route cannot be carried out at all: the spec forces FSDP2 but needs tp/pp, the requested sizes do not fit the
model (the user's sizes, not something a phase can repair), or the target has no Megatron entry point.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.tools.megatron.parallel_check import ParallelSizes, check_parallel

FSDP2, MEGATRON = "fsdp2", "megatron"
# The Megatron route's training entry point in a MindSpeed-MM checkout (examples' launch scripts run it)
MEGATRON_ENTRY = "pretrain_vlm.py"


@dataclass
class BackendChoice:
    backend: str = FSDP2
    reasons: list[str] = field(default_factory=list)
    parallel_check: dict[str, Any] | None = None  # check_parallel's result for the requested sizes
    unsupported: str | None = None  # set when the chosen route cannot be carried out yet: the run stops with it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def choose_backend(spec: Any, cfg: dict[str, Any], target: Path | None = None) -> BackendChoice:
    """The route for this spec and source config; ``target`` (a checkout) is checked for the Megatron entry point."""
    forced = getattr(spec, "backend", "auto") or "auto"
    par = getattr(spec, "parallelism", None)
    sizes = ParallelSizes(tp=par.tp, pp=par.pp, cp=par.cp, vpp=par.vpp) if par is not None else None
    out = BackendChoice()
    needs = []
    if sizes is not None:
        if sizes.tp > 1:
            needs.append(f"tp={sizes.tp} (the FSDP2 backend supports tensor_parallel_size 1 only)")
        if sizes.pp > 1 or sizes.vpp > 1:
            needs.append(f"pp={sizes.pp}, vpp={sizes.vpp} (the FSDP2 backend has no pipeline stages)")
    if forced != "auto":
        out.backend = forced
        out.reasons.append(f"backend {forced}: forced by the spec")
        if forced == FSDP2 and needs:
            out.unsupported = ("the spec forces the fsdp2 backend but asks for " + "; ".join(needs)
                               + ". What to do: drop those sizes or use backend: megatron")
    elif needs:
        out.backend = MEGATRON
        out.reasons.append("backend megatron: the spec's parallelism needs " + "; ".join(needs))
    else:
        out.reasons.append("backend fsdp2: no tensor or pipeline parallelism requested"
                           + (f" (cp={sizes.cp} runs as Ulysses/ring CP on FSDP2)" if sizes and sizes.cp > 1 else ""))
    if sizes is not None and cfg:
        check = check_parallel(cfg, sizes)
        out.parallel_check = check.to_dict()
        if check.error:
            out.reasons.append(f"parallel sizes not checked: {check.error}")
        elif check.problems:
            out.reasons.append("parallel sizes do not fit the model: " + "; ".join(check.problems))
    if out.backend == MEGATRON and out.unsupported is None:
        bad = (out.parallel_check or {}).get("problems") or []
        if bad:
            out.unsupported = ("the Megatron backend route was chosen (" + out.reasons[0] + ") but the requested "
                               "sizes do not fit the model: " + "; ".join(bad)
                               + ". What to do: choose sizes that divide the model (parallelism in the spec)")
        elif target is not None and not (Path(target) / MEGATRON_ENTRY).is_file():
            out.unsupported = (f"the Megatron backend route was chosen ({out.reasons[0]}) but the target {target} "
                               f"has no {MEGATRON_ENTRY}: not a MindSpeed-MM checkout with the Megatron backend. "
                               "What to do: point target at a full MindSpeed-MM checkout, or drop tp/pp")
    return out


def route_gates(fsdp2: dict[str, Any], megatron: dict[str, Any]) -> dict[str, Any]:
    """One gate per slot (G1..G6) that runs the chosen route's gate: the graph and its gate order stay the same,
    the plan's ``backend`` picks what each slot proves. A slot the Megatron route has no gate for fails loudly."""
    def dispatch(slot: str):
        def gate(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
            backend = (state.get("plan") or {}).get("backend", FSDP2)
            table = megatron if backend == MEGATRON else fsdp2
            if slot not in table:
                raise KeyError(f"no {backend} gate for slot {slot}")
            return table[slot](deps, state)

        gate.__name__ = f"gate_{slot}"
        return gate

    return {slot: dispatch(slot) for slot in sorted(set(fsdp2) | set(megatron))}
