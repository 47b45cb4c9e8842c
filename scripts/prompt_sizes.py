"""Print the estimated token size of every rendered prompt with a realistic mid-run state.

Estimate: ceil(chars / 3.5) (msmigrate.prompts.render.estimate_tokens) — no tokenizer download. The system prompt
includes the live knowledge index. Exit code 1 if the largest prompt exceeds --budget tokens (default 12000), or if
the system prompt plus the largest node prompt does (they are sent together).

    python scripts/prompt_sizes.py [--budget 12000]
"""

from __future__ import annotations

import argparse
import sys

from msmigrate.prompts.render import (MEGATRON_NODE_NAMES, MEGATRON_SYSTEM, NODE_NAMES, estimate_tokens,
                                      render)
from msmigrate.prompts.sample_state import ALL_PROMPTS, sample_vars


def phase_schema_chars() -> dict[str, tuple[int, int]]:
    """{phase: (tools offered, schema chars)}: every tool as one list ("all"), then what the LLM policy offers in
    each work phase (agent/policies/phase_offer.py)."""
    import json
    from pathlib import Path

    from msmigrate.agent.policies.phase_offer import offered_tools, openai_schemas
    from msmigrate.agent.runner import build_tools
    from msmigrate.core.run_context import RunContext

    from langchain_core.utils.function_calling import convert_to_openai_tool

    tools = build_tools(RunContext("sizes", Path("/nonexistent/run"), Path("/nonexistent/source"),
                                   Path("/nonexistent/target"), "sample"))
    out = {"all (before)": (len(tools), len(json.dumps([convert_to_openai_tool(t) for t in tools])))}
    for phase in ("model", "data", "config"):
        offered = offered_tools(phase, tools)
        out[phase] = (len(offered), len(json.dumps(openai_schemas(offered))))
    for phase in ("model", "data", "config"):  # a Megatron plan: that route's tools (phase_offer.py)
        offered = offered_tools(phase, tools, "megatron")
        out[f"megatron {phase}"] = (len(offered), len(json.dumps(openai_schemas(offered))))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=12000, help="token budget per prompt")
    args = parser.parse_args(argv)

    sizes = {}
    print(f"{'prompt':<16}{'chars':>8}{'~tokens':>10}")
    for name in ALL_PROMPTS:
        text = render(name, **sample_vars(name, live_index=True))
        sizes[name] = estimate_tokens(text)
        print(f"{name:<16}{len(text):>8}{sizes[name]:>10}")
    schemas = phase_schema_chars()
    print(f"\n{'tool schemas':<16}{'tools':>6}{'chars':>8}{'~tokens':>10}   (sent with every request of the phase)")
    for phase, (n, chars) in schemas.items():
        print(f"{phase:<16}{n:>6}{chars:>8}{estimate_tokens('x' * chars):>10}")
    largest = max(sizes, key=sizes.get)
    combined = max(sizes["system"] + max(sizes[n] for n in NODE_NAMES),
                   sizes[MEGATRON_SYSTEM] + max(sizes[n] for n in MEGATRON_NODE_NAMES))
    print(f"\nlargest: {largest} ~{sizes[largest]} tokens; system + largest node prompt ~{combined} tokens "
          f"(budget {args.budget}; estimate = chars / 3.5)")
    return 0 if sizes[largest] <= args.budget and combined <= args.budget else 1


if __name__ == "__main__":
    sys.exit(main())
