"""Which policy migrates each bundled fixture, and on which route — read from what the project scores, not typed in.

The eval suites (``suites/*.yaml``) are the record: every task names a fixture, the target it runs on (the FSDP2
stand-in or the Megatron stand-in), the spec it runs with (the parallelism that picks the Megatron route) and the
exit a correct run ends with (``FixtureSpec.expected_exit`` where the task does not say). ``msmigrate eval <suite>
--policy rules`` scores exactly these. Two facts of the rules policy complete a cell: it writes no plugin for remote
code (``routes/fsdp2/rules/model.py`` declines a plan whose build route is not ``transformers``; that is the LLM
policy's work), and an expected exit of ``unsupported_by_policy`` is a decline by design (encoder-decoder, early
fusion, sizes that do not fit).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from msmigrate.faces.eval.suite import SUITES_DIR, EvalTask, load_suite

MEGATRON_TARGET = "megatron_standin"
# what a correct run on a machine without an accelerator ends with, said in a few words
OUTCOME_WORDS = {"success": "G0-G6", "needs_accelerator": "G0-G3, then needs an accelerator",
                 "unsupported_by_policy": "declined"}


@dataclass
class FixtureRoutes:
    name: str
    family: str
    fsdp2: list[str] = field(default_factory=list)
    megatron: list[str] = field(default_factory=list)

    def cells(self) -> tuple[str, str, str, str]:
        return (self.name, self.family, "; ".join(self.fsdp2) or "-", "; ".join(self.megatron) or "-")


def _sizes(task: EvalTask) -> str:
    sizes = (task.spec or {}).get("parallelism") or {}
    return ",".join(f"{k}={v}" for k, v in sizes.items()) or "tp=pp=1"


def _fsdp2_cell(custom_code: bool, expected: str) -> str:
    if custom_code:
        return "llm (rules declines remote code)"
    if expected == "unsupported_by_policy":
        return "rules: declined (the honest answer)"
    return f"rules: {OUTCOME_WORDS.get(expected, expected)}"


def fixture_routes() -> list[FixtureRoutes]:
    """One row per fixture: for each suite task on it, the policy and the outcome a correct run has."""
    from msmigrate.testbeds.fixtures import FIXTURES

    rows = {name: FixtureRoutes(name, spec.family) for name, spec in sorted(FIXTURES.items())}
    for path in sorted(SUITES_DIR.glob("*.yaml")):
        suite = load_suite(path)
        if suite.error:
            raise ValueError(f"{path.name}: {suite.error}")
        for task in suite.tasks:
            if task.fixture not in rows:
                continue
            fx = FIXTURES[task.fixture]
            expected = task.expect.get("exit_status") or fx.expected_exit
            row = rows[task.fixture]
            if task.target == MEGATRON_TARGET:
                row.megatron.append(f"rules {_sizes(task)}: {OUTCOME_WORDS.get(expected, expected)}")
            else:
                cell = _fsdp2_cell(fx.custom_code, expected)
                if cell not in row.fsdp2:
                    row.fsdp2.append(cell)
    return list(rows.values())
