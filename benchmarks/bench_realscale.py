"""Which real-scale variants fit this host: each variant's size measured on the meta device (parameters at 2 layers
per tower, the media tokens its published processor gives the sample image), and — from one measured end-to-end
run of a variant (the ``realscale_figures.json`` tests/realscale/test_realscale_rules.py saves in its run folder,
plus that run's peak memory of the whole process tree, PSS summed, as forked processes share pages) — every
variant's peak memory and training-parity probe time projected from it.

    python benchmarks/bench_realscale.py --figures RUN/realscale_figures.json --peak-mb 12551 --step-s 77.2 --steps 5

The projections are stated as projections: memory scales with the parameters (weights, gradients and Adam state of
the source and the migrated model dominate at 2 layers per tower), time with parameters x tokens (6·N·T FLOPs per
sample). Only the measured variant's figures are measurements.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

GIB = 1024.0


def sizes() -> dict[str, dict[str, float]]:
    """Per variant: parameters (millions) and tokens of one sample image, both on the meta device."""
    import torch
    from transformers import AutoModelForImageTextToText

    from msmigrate.testbeds.fixtures.realscale import REALSCALE, realscale_cost, realscale_parts

    out = {}
    for name in REALSCALE:
        with torch.device("meta"):
            model = AutoModelForImageTextToText.from_config(realscale_parts(name).config)
        params = sum(p.numel() for p in model.parameters())
        out[name] = {"params_m": params / 1e6, "tokens": realscale_cost(name) // params}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--figures", type=Path, help="realscale_figures.json of a measured run")
    ap.add_argument("--peak-mb", type=float, help="that run's peak memory of the whole process tree, PSS summed (MB)")
    ap.add_argument("--step-s", type=float, help="that run's G4 launch median step (s)")
    ap.add_argument("--memory-gib", type=float, default=24.0, help="the host's memory")
    ap.add_argument("--probe-hours", type=float, default=1.0, help="what one parity probe may take to 'fit'")
    ap.add_argument("--steps", type=int, default=20, help="K, the parity probe's steps (launch.parity_steps)")
    args = ap.parse_args()
    table = sizes()
    figures = json.loads(args.figures.read_text()) if args.figures else None
    measured = None
    if figures:
        measured = next(n for n in table if figures["run_id"].startswith(n + "-"))
        print(f"measured: {measured}, run {figures['run_id']} ({figures['exit']}): wall per gate (s) "
              f"{figures['wall_s_per_gate']}; peak {args.peak_mb or '?'} MB (process tree, PSS); media tokens per "
              f"sample {figures['media_tokens_per_sample']} of {figures['tokens_per_sample']} tokens; cutoff_len "
              f"{figures['cutoff_len']}; parity probes {figures['parity_probes']}")
    base = table[measured] if measured else None
    print(f"{'variant':16} {'params M':>9} {'tokens':>7} {'compute x':>9} {'peak GiB':>9} {'probe h':>8}  fits")
    for name, row in table.items():
        compute = peak = probe = None
        if base:
            compute = row["params_m"] * row["tokens"] / (base["params_m"] * base["tokens"])
            peak = args.peak_mb / GIB * row["params_m"] / base["params_m"] if args.peak_mb else None
            # one probe: 2K steps (K source, K migrated) of the measured step scaled by compute
            probe = 2 * args.steps * args.step_s * compute / 3600 if args.step_s else None
        fits = "measured" if name == measured else (
            "?" if peak is None or probe is None else
            "yes" if peak < args.memory_gib / 2 and probe <= args.probe_hours else
            "no: memory" if peak >= args.memory_gib / 2 else "no: time")
        cells = [f"{x:{w}.2f}" if x is not None else "-".rjust(w) for x, w in ((compute, 9), (peak, 9), (probe, 8))]
        print(f"{name:16} {row['params_m']:9.1f} {row['tokens']:7d} {' '.join(cells)}  {fits}")
    print(f"'fits': projected peak under half the host's {args.memory_gib:g} GiB (it is shared) and one {args.steps}-step "
          f"parity probe within {args.probe_hours:g} h; projections scale the measured run, they are not measurements")


if __name__ == "__main__":
    from results_md import recorded

    with recorded("bench_realscale"):
        main()
