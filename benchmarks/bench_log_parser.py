"""Throughput and memory benchmark for msmigrate.tools.log_parser.

Generates a large log in the real MindSpeed-MM format (iteration lines, INFO lines, warnings, occasional checkpoint
lines) in a temporary directory, parses it with ``parse_log`` and prints MB/s and peak RSS.

    python benchmarks/bench_log_parser.py            # ~1 GB
    python benchmarks/bench_log_parser.py --mb 200   # smaller

Target: >= 100 MB/s with memory flat in the log size (the parser keeps bounded state only).
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

from msmigrate.tools.log_parser import parse_log

PREFIX = "[Rank 0 | Local Rank 0] 2026-11-30 04:{m:02d}:{s:02d},{ms:03d} {lvl} [{name}:48] => "


def _iteration_line(i: int, total: int) -> str:
    ts = f"2026-11-30 04:{(i // 60) % 60:02d}:{i % 60:02d}"
    loss = 6.0 / (1.0 + i * 1e-6)
    return (
        PREFIX.format(m=(i // 60) % 60, s=i % 60, ms=i % 1000, lvl="INFO", name="mindspeed_mm.fsdp.train.train_engine")
        + f" [{ts}] iteration {i:8d}/{total:8d} | consumed samples: {i * 16:12d} |"
        f" elapsed time per iteration (ms): {250 + i % 7:.1f} | learning rate: {1e-4:.6E} |"
        f" global batch size: {16:5d} | loss: {loss:.6E} | grad norm: {1.5 + (i % 5) * 0.1:.3f} |\n"
    )


def generate(path: Path, target_mb: int) -> int:
    """Write about ``target_mb`` MB: per iteration one iteration line, two INFO lines, and every 5th a warning."""
    target = target_mb * 1024 * 1024
    total = 10_000_000
    written, i = 0, 0
    info = PREFIX.format(m=1, s=2, ms=3, lvl="INFO", name="mindspeed_mm.fsdp.data.dataloader") + (
        "Preloading next batch for pipeline stage 0, queue depth 2, prefetch factor 4\n"
    )
    info2 = PREFIX.format(m=1, s=2, ms=3, lvl="INFO", name="mindspeed_mm.fsdp.distributed") + (
        "gradient sync complete for bucket 3 of 7 (param count 1048576)\n"
    )
    warn = PREFIX.format(m=1, s=2, ms=3, lvl="WARNING", name="transformers.modeling_utils") + (
        "`use_cache=True` is incompatible with gradient checkpointing. Setting `use_cache=False`.\n"
    )
    with open(path, "w", buffering=16 << 20) as fh:
        buf: list[str] = []
        while written < target:
            i += 1
            block = _iteration_line(i, total) + info + info2 + (warn if i % 5 == 0 else "")
            if i % 50_000 == 0:
                block += PREFIX.format(m=0, s=0, ms=0, lvl="INFO", name="ckpt") + (
                    f"Saved checkpoint to /tmp/ckpt/iter_{i:07d}\n"
                )
            buf.append(block)
            written += len(block)
            if len(buf) >= 10_000:
                fh.write("".join(buf))
                buf.clear()
        fh.write("".join(buf))
    return i


def rss_mb() -> float:
    """Current resident set size (Linux /proc), in MB."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=1024, help="size of the generated log in MB")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="msmigrate-bench-") as tmp:
        path = Path(tmp) / "train.log"
        t0 = time.perf_counter()
        iterations = generate(path, args.mb)
        size_mb = path.stat().st_size / 2**20
        print(f"generated {size_mb:.0f} MB ({iterations} iterations) in {time.perf_counter() - t0:.1f}s")
        rss_before = rss_mb()
        t0, c0 = time.perf_counter(), time.process_time()
        summary = parse_log(path, exit_code=0)
        seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        assert summary.steps == iterations, (summary.steps, iterations)
        print(f"parsed {summary.steps} iterations, {summary.lines} lines in {seconds:.2f}s")
        print(f"throughput: {size_mb / seconds:.1f} MB/s wall, {size_mb / cpu_seconds:.1f} MB/s per CPU second")
        print(f"RSS before parse: {rss_before:.0f} MB, after: {rss_mb():.0f} MB, peak (process): {peak_mb:.0f} MB")
        print(f"loss curve points kept: {len(summary.loss_curve)}, trend: {summary.loss_trend}")


if __name__ == "__main__":
    from results_md import recorded

    with recorded("bench_log_parser"):
        main()
