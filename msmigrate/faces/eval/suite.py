"""Eval tasks: a source (a known-model fixture, or a folder), a target (a fresh stand-in, or a checkout), and the
facts a correct migration must produce. A suite is a YAML file; ``--tasks-dir`` adds every ``*.yaml`` there (one
task or a list of tasks each — for private held-out tasks)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SUITES_DIR = Path(__file__).resolve().parent / "suites"
BARE_TOKENIZER = "tokenizer+image_processor"  # FixtureSpec.processor of a source with no HF processor class
DEFAULT_DATASET_TYPE = "huggingface"  # the generic HF-style dataset every known model maps through
EXPECT_KEYS = ("model_id", "dataset_type", "template", "data_branch")
# optional facts: the training backend route, the Megatron components by role ("vision_encoder=id,text_decoder=id"),
# the exit a correct run ends with (needs_accelerator for the Megatron route on a CPU machine), and the model_id of a
# Megatron component the run must register itself
ROUTE_EXPECT_KEYS = ("backend", "components", "exit_status", "new_component", "new_projector")
# targets generated fresh per trial: the FSDP2 stand-in, and the Megatron-route stand-in (pretrain_vlm.py)
GENERATED_TARGETS = ("standin", "megatron_standin")
TASK_KEYS = ("id", "model_name", "fixture", "source", "target", "expect", "spec")
SUITE_KEYS = ("name", "trials", "tasks")


@dataclass
class EvalTask:
    id: str
    model_name: str
    fixture: str | None = None  # a FIXTURES name, built offline …
    source: Path | None = None  # … or an existing source folder
    target: str = "standin"  # "standin" / "megatron_standin" = a fresh stand-in per trial, else a path (cloned)
    expect: dict[str, str] = field(default_factory=dict)
    spec: dict[str, Any] = field(default_factory=dict)  # RunSpec overrides (budgets, launch, data …)


@dataclass
class Suite:
    name: str
    tasks: list[EvalTask]
    trials: int = 1
    error: str | None = None


def expectations_from_fixture(name: str, model_name: str | None = None) -> dict[str, str]:
    from msmigrate.testbeds.fixtures import FIXTURES

    fx = FIXTURES[name]
    out = {"model_id": fx.model_id, "dataset_type": DEFAULT_DATASET_TYPE, "template": fx.template,
           "data_branch": fx.data_branch}
    if fx.processor == BARE_TOKENIZER and fx.data_branch == "B":
        # AutoProcessor gives this source a bare tokenizer, which the target's load_tokenizer drops: a dataset plugin
        # of the model's own that pairs it with the image processor (branch C, dataset_type = the run's model name,
        # what the plan recommends) is as right as B's entries plus a processor the huggingface dataset can load.
        out["data_branch"] = "B|C"
        out["dataset_type"] = f"{DEFAULT_DATASET_TYPE}|{model_name or name}"
    if fx.expected_exit != "success":  # an honest decline is the correct outcome (scorers.check_decline)
        out["exit_status"] = fx.expected_exit
    return out


def task_from_dict(raw: dict[str, Any], base: Path) -> EvalTask:
    from msmigrate.agent.config import RunSpec, unknown_key_error
    from msmigrate.testbeds.fixtures import FIXTURES

    where = f"task {raw.get('id') or raw.get('fixture') or raw.get('source')}"
    bad = (unknown_key_error(raw, TASK_KEYS, where)
           or unknown_key_error(raw.get("expect"), EXPECT_KEYS + ROUTE_EXPECT_KEYS, f"{where} expect")
           or unknown_key_error(raw.get("spec"), RunSpec, f"{where} spec"))
    if bad:
        raise ValueError(bad)
    fixture = raw.get("fixture")
    if fixture is not None and fixture not in FIXTURES:
        raise ValueError(f"unknown fixture {fixture!r}; known: {', '.join(sorted(FIXTURES))}")
    if fixture is None and not raw.get("source"):
        raise ValueError("a task needs 'fixture' or 'source'")
    derived = expectations_from_fixture(fixture, raw.get("model_name")) if fixture else {}
    expect = {**derived, **(raw.get("expect") or {})}
    missing = [k for k in EXPECT_KEYS if k not in expect]
    if missing:
        raise ValueError(f"task {raw.get('id') or fixture or raw.get('source')}: expect lacks {missing}")
    source = raw.get("source")
    target = str(raw.get("target", "standin"))
    if target not in GENERATED_TARGETS and not Path(target).is_absolute():
        target = str((base / target).resolve())
    return EvalTask(
        id=str(raw.get("id") or fixture or Path(source).name), model_name=str(raw.get("model_name") or fixture or
                                                                             Path(source).name),
        fixture=fixture, source=None if source is None else (base / source).resolve(), target=target,
        expect={k: str(v) for k, v in expect.items()}, spec=task_spec_overrides(raw.get("spec"), base))


def task_spec_overrides(spec: Any, base: Path) -> dict[str, Any]:
    """A task's RunSpec overrides, a ``source_step`` file made absolute against the suite's folder (the run spec
    is built from them elsewhere, where that folder is no longer known)."""
    from msmigrate.tools.source_step import resolve_ref

    out = dict(spec or {})
    if out.get("source_step"):
        out["source_step"] = resolve_ref(str(out["source_step"]), base)
    return out


def _tasks_in(path: Path) -> list[EvalTask]:
    from msmigrate.agent.config import unknown_key_error

    raw = yaml.safe_load(path.read_text()) or []
    if isinstance(raw, dict) and "tasks" in raw:
        bad = unknown_key_error(raw, SUITE_KEYS, path.name)
        if bad:
            raise ValueError(bad)
        raw = raw["tasks"]
    entries = raw if isinstance(raw, list) else [raw]
    return [task_from_dict(e if isinstance(e, dict) else {"fixture": e}, path.parent) for e in entries]


def load_suite(suite: str | Path, tasks_dir: Path | None = None, only: list[str] | None = None) -> Suite:
    path = Path(suite)
    if not path.is_file():
        path = SUITES_DIR / f"{suite}.yaml"
    if not path.is_file():
        known = ", ".join(p.stem for p in SUITES_DIR.glob("*.yaml"))
        return Suite(str(suite), [], error=f"no suite {suite!r} (a YAML path or one of: {known})")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
        tasks = _tasks_in(path)
        for extra in sorted(Path(tasks_dir).glob("*.yaml")) if tasks_dir else []:
            tasks += _tasks_in(extra)
    except (OSError, yaml.YAMLError, ValueError) as exc:
        return Suite(str(suite), [], error=str(exc))
    ids = [t.id for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        return Suite(str(suite), [], error=f"duplicate task ids: {dupes}")
    if only:
        unknown = [o for o in only if o not in ids]
        if unknown:
            return Suite(str(suite), [], error=f"unknown task ids {unknown}; suite has {ids}")
        tasks = [t for t in tasks if t.id in only]
    return Suite(str(raw.get("name") or path.stem), tasks, int(raw.get("trials") or 1))
