"""Throughput of every training launch, for the report: tokens per second, model FLOPs per token, MFU.

Read from what the run measured, nothing assumed:

- step time and global batch size: the launch log's per-iteration lines (``elapsed time per iteration (ms)``,
  ``global batch size``), the median over the steps after the first (``log_parser``: the first holds warm-up);
- tokens per sample: G2's data parity, the mean length of the user's samples as the target's pipeline maps them
  (truncated at ``cutoff_len``); without it the launched config's ``cutoff_len``, an upper bound (said so);
- FLOPs per token, training (forward + backward = 3 × forward): ``6·N + 12·L·d·S`` — N the built model's parameters
  less the input embedding (a lookup, no matmul), L and d the language model's layer count and width, S the tokens
  per sample (the attention score and weighted-sum matmuls, 2·2·S·d per layer forward). The parameter count is G1's
  module tree of the built model. Vision tokens pass through the vision tower rather than the decoder, so this is
  the decoder-centred estimate the MFU convention uses; it counts every parameter once per token.
- MFU: achieved FLOP/s over the launch's ranks × the chip's dense bf16/fp16 peak, the chip named by G0's runtime
  probe (``npu-smi`` names, ``torch.cuda.get_device_name``). A CPU launch, or a chip not in the table, gives
  "n/a" with the reason — never a guessed peak.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# Dense (no sparsity) bf16/fp16 tensor peak per chip, TFLOP/s, from the vendors' datasheets. Matched as a
# substring of the device name, first match wins (so "H200" is tried before "H20", "H100 PCIe" before "H100").
PEAK_TFLOPS: tuple[tuple[str, float], ...] = (
    ("H200", 989.4),
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.4),
    ("H800", 989.4),
    ("H20", 148.0),
    ("A100", 312.0),
    ("A800", 312.0),
    ("L40S", 362.0),
    ("V100", 125.0),
    ("910B3", 313.0),  # Atlas 800T A2: 2.5 PFLOPS FP16 over its 8 chips
    ("910B4", 280.0),  # Atlas 300T A2 training card: 280 TFLOPS FP16
)


def peak_tflops(device_name: str | None) -> float | None:
    if not device_name:
        return None
    for key, peak in PEAK_TFLOPS:
        if key.lower() in device_name.lower():
            return peak
    return None


def flops_per_token(params: int, embedding_params: int, layers: int | None, hidden: int | None,
                    seq_len: float) -> float:
    """Training FLOPs per token (module doc): 6·N + 12·L·d·S."""
    attention = 12.0 * layers * hidden * seq_len if layers and hidden else 0.0
    return 6.0 * (params - embedding_params) + attention


def device_name(env: dict[str, Any] | None, kind: str | None) -> str | None:
    """The chip G0's runtime probe saw for this device kind (npu-smi's name, or the first CUDA device's)."""
    env = env or {}
    if kind == "npu":
        npus = (env.get("npu_smi") or {}).get("npus") or []
        return next((str(n.get("name")) for n in npus if n.get("name")), None)
    if kind == "cuda":
        names = (env.get("cuda") or {}).get("names") or []
        return names[0] if names else None
    return None


def launch_throughput(metrics: dict[str, Any], *, nproc: int, kind: str | None, chip: str | None,
                      model: dict[str, Any] | None, seq_len: float | None, seq_from: str) -> dict[str, Any]:
    """One launch's figures; any that cannot be computed is None with ``why`` saying what was missing."""
    step_ms, gbs = metrics.get("median_step_ms"), metrics.get("global_batch_size")
    out: dict[str, Any] = {"tokens_per_s": None, "flops_per_token": None, "achieved_tflops": None, "mfu": None,
                           "peak_tflops": None, "device": chip or kind, "nproc": nproc, "seq_len": seq_len,
                           "seq_from": seq_from, "why": []}
    if not step_ms or not gbs:
        out["why"].append("no step time or global batch size in the launch log")
    elif not seq_len:
        out["why"].append("no tokens per sample (neither G2's samples nor cutoff_len)")
    else:
        out["tokens_per_s"] = gbs * seq_len * 1000.0 / step_ms
    if model and model.get("param_count") and seq_len:
        out["flops_per_token"] = flops_per_token(model["param_count"], model.get("embedding_params") or 0,
                                                 model.get("text_layers"), model.get("text_hidden"), seq_len)
    elif not model or not model.get("param_count"):
        out["why"].append("no parameter count of the built model (G1's module tree)")
    if out["tokens_per_s"] is not None and out["flops_per_token"] is not None:
        out["achieved_tflops"] = out["tokens_per_s"] * out["flops_per_token"] / 1e12
        if kind == "cpu":
            out["why"].append("MFU n/a on CPU (no meaningful peak)")
        elif (peak := peak_tflops(chip)) is None:
            out["why"].append(f"MFU n/a: no known peak for device {chip or kind!r}")
        else:
            out["peak_tflops"] = peak
            out["mfu"] = out["achieved_tflops"] / (peak * max(1, nproc))
    return out


def _seq_len(gates: dict[str, Any], config_path: str | None) -> tuple[float | None, str]:
    data = ((gates.get("G2") or {}).get("parity") or {}).get("data") or {}
    if data.get("tokens") and data.get("samples_compared"):
        return data["tokens"] / data["samples_compared"], f"mean of {data['samples_compared']} mapped samples (G2)"
    if config_path and Path(config_path).is_file():
        import yaml

        cfg = yaml.safe_load(Path(config_path).read_text()) or {}
        cutoff = (((cfg.get("data") or {}).get("dataset_param") or {}).get("basic_parameters") or {}).get("cutoff_len")
        if cutoff:
            return float(cutoff), "cutoff_len (upper bound)"
    return None, "unknown"


def _model_facts(gates: dict[str, Any]) -> dict[str, Any] | None:
    path = (gates.get("G1") or {}).get("module_tree_file")
    if not path or not Path(path).is_file():
        return None
    return json.loads(Path(path).read_text())


def throughput_rows(gates: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(launch label, figures) for every training launch of G4–G6."""
    g0 = (gates.get("G0") or {}).get("evidence") or [{}]
    env = ((g0[0].get("metrics") or {}).get("env") or {}) if g0 else {}
    model = _model_facts(gates)
    rows = []
    for g in ("G4", "G5", "G6"):
        for ev in (gates.get(g) or {}).get("evidence", []):
            m = ev.get("metrics") or {}
            if "median_step_ms" not in m:
                continue  # a parity probe, no launch
            kind = ev.get("device")
            seq, seq_from = _seq_len(gates, ev.get("config_path"))
            rows.append((f"{g} {ev.get('label', '')}",
                         launch_throughput(m, nproc=int(ev.get("nproc") or 1), kind=kind,
                                           chip=device_name(env, kind), model=model, seq_len=seq,
                                           seq_from=seq_from)))
    return rows


def throughput_lines(gates: dict[str, Any]) -> list[str]:
    rows = throughput_rows(gates)
    if not rows:
        return []

    def fig(x: Any, fmt: str) -> str:
        return format(x, fmt) if isinstance(x, (int, float)) else "n/a"

    lines = ["", "## Throughput", "",
             "Tokens/s = global batch × tokens per sample ÷ median step time (launch log); FLOPs/token = 6·N + "
             "12·L·d·S (N: the built model's parameters less the input embedding); MFU against the chip's dense "
             "bf16 peak × ranks.", "",
             "| launch | device × ranks | tokens/sample | tokens/s | GFLOPs/token | achieved TFLOP/s | MFU | note |",
             "|---|---|---|---|---|---|---|---|"]
    for label, t in rows:
        mfu = f"{t['mfu']:.1%}" if isinstance(t["mfu"], float) else "n/a"
        gflops = t["flops_per_token"] / 1e9 if t["flops_per_token"] is not None else None
        lines.append(f"| {label} | {t['device']} × {t['nproc']} | {fig(t['seq_len'], '.1f')} ({t['seq_from']}) | "
                     f"{fig(t['tokens_per_s'], '.1f')} | {fig(gflops, '.4g')} | {fig(t['achieved_tflops'], '.4g')} | "
                     f"{mfu} | {'; '.join(t['why'])} |")
    return lines
