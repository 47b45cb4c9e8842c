"""The delivered files read as a maintainer reads a pull request (DESIGN decision 16): what the run committed on its
work branch, checked for what makes a delivery unmergeable or untrainable, and shown as a diff against the most
similar existing example it was derived from.

Checks, each over every file the branch changed:
- no absolute path other than the spec's own source and data folders (and those the similar example itself holds,
  such as its toolkit's ``set_env.sh``);
- no run id;
- no fact measured on the sample inputs written as a literal: the processor's expansion of one image (its text)
  and its ``processor_config.json`` settings assigned in generated code;
- the launch script asks the size the plan derived from the spec (processes per node, nodes);
- the config starts from the source's weights (``training.load`` on a safetensors source, never a random init; the
  plan's converted checkpoint where transformers converts the source's at load — its folder, under the run, is the
  one absolute path with the run id a delivery may hold)."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import yaml

from msmigrate.agent.launch_size import script_size
from msmigrate.agent.routes.fsdp2.weights_load import hf_weight_dir, weights_origin
from msmigrate.core.git import git, git_out

# an absolute path: a slash not preceded by a name character, then at least two segments
_ABS_PATH = re.compile(r"(?<![\w$}.~:/\-])(/(?:[\w.+\-]+/)+[\w.+\-]*)")
DIFF_LINES = 400


def _files(repo: Path, base: str, branch: str) -> dict[str, str]:
    names = git_out(repo, "diff", "--name-only", "--diff-filter=AM", f"{base}..{branch}").splitlines()
    out = {}
    for name in names:
        proc = git(repo, "show", f"{branch}:{name}", check=False)
        if proc.returncode == 0:
            out[name] = proc.stdout.rstrip("\n")
    return out


def _read(repo: Path, ref: str, path: str | None) -> str:
    if not path:
        return ""
    proc = git(repo, "show", f"{ref}:{path}", check=False)
    return proc.stdout.rstrip("\n") if proc.returncode == 0 else ""


def absolute_paths(text: str) -> list[str]:
    return _ABS_PATH.findall(text)


def measured_literals(name: str, text: str, expansion: dict[str, Any] | None) -> list[str]:
    """Facts of the sample inputs found written into a delivered file."""
    if not expansion:
        return []
    found = []
    for image in expansion.get("per_image") or []:
        piece = image.get("text") or ""
        if (image.get("count") or 0) > 1 and piece and piece in text:
            found.append(f"the processor's expansion of a sample image ({image.get('count')} media tokens)")
            break
    if name.endswith(".py"):
        for key, value in (expansion.get("processor_kwargs") or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and \
                    re.search(rf"\b{re.escape(key)}\b\W{{0,4}}\s*[=:]\s*{re.escape(repr(value))}\b", text):
                found.append(f"processor setting {key} = {value}")
    return found


def review_delivery(target: Path, base: str | None, branch: str, *, plan: dict[str, Any], source: Path,
                    data_path: Path | None, run_id: str) -> dict[str, Any]:
    """``{"problems", "files", "diffs"}`` for the run's work branch; ``problems`` empty when a maintainer's checks
    find nothing. Only what the branch added or modified is read."""
    if not base:
        return {"problems": [], "files": [], "diffs": {}, "skipped": "no edits recorded"}
    repo = Path(target)
    files = _files(repo, base, branch)
    similar_cfg = _read(repo, base, plan.get("similar_case"))
    similar_dir = str(Path(plan.get("similar_case") or "x").parent)
    similar_script = next((_read(repo, base, p) for p in git_out(repo, "ls-tree", "--name-only", base,
                                                                    similar_dir + "/").splitlines() if p.endswith(".sh") and Path(plan.get("similar_case") or "").name in
                           _read(repo, base, p)), "") if plan.get("similar_case") else ""
    converted = str(((plan.get("weights") or {}).get("folder")) or "")  # the run's converted checkpoint, if any
    allowed = [str(source)] + ([str(Path(data_path).parent)] if data_path else []) + ([converted] if converted else [])
    inherited = set(absolute_paths(similar_cfg + similar_script))
    expansion = plan.get("media_expansion")
    problems: list[str] = []
    for name, text in files.items():
        stray = sorted({p for p in absolute_paths(text) if p not in inherited
                        and not any(p == a or p.startswith(a.rstrip("/") + "/") for a in allowed)})
        if stray:
            problems.append(f"{name}: absolute path(s) outside the spec's source and data: {stray[:5]}")
        if run_id and run_id in (text.replace(converted, "") if converted else text):  # the run's folder names it
            problems.append(f"{name}: holds the run id {run_id}")
        problems += [f"{name}: {what}" for what in measured_literals(name, text, expansion)]
    size = plan.get("launch_size")
    script = files.get(plan.get("script_path") or "")
    if size and script is not None:
        got = script_size(script)
        if got != (size["nproc_per_node"], size["nnodes"]):
            problems.append(f"{plan['script_path']}: launches {got[0]} process(es) per node on {got[1]} node(s), "
                            f"the spec asks {size['nproc_per_node']} on {size['nnodes']}")
    config = files.get(plan.get("config_path") or "")
    if config is not None:
        try:
            cfg = yaml.safe_load(config) or {}
        except yaml.YAMLError as exc:
            cfg = {}
            problems.append(f"{plan['config_path']}: not YAML ({str(exc).splitlines()[0]})")
        kind, folder = weights_origin(cfg if isinstance(cfg, dict) else {})
        if kind == "random":
            problems.append(f"{plan['config_path']}: trains from a random init (meta device, no training.load)")
        elif hf_weight_dir(source) and kind != "hf-load":
            problems.append(f"{plan['config_path']}: the source has safetensors weights but training.load does not "
                            f"load them ({kind} {folder})")
        elif converted and kind == "hf-load" and Path(str(folder)) != Path(converted):
            problems.append(f"{plan['config_path']}: training.load names {folder}, but transformers converts the "
                            f"source's checkpoint at load and the target's loader maps key by key: the converted "
                            f"checkpoint is {converted}")
    diffs = {}
    for mine, theirs, label in ((config, similar_cfg, plan.get("config_path")), (script, similar_script,
                                                                                   plan.get("script_path"))):
        if mine is not None and theirs:
            lines = list(difflib.unified_diff(theirs.splitlines(), mine.splitlines(), "similar example", label,
                                              lineterm=""))
            diffs[label] = "\n".join(lines[:DIFF_LINES]) + ("\n… (cut)" if len(lines) > DIFF_LINES else "")
    return {"problems": problems, "files": sorted(files), "diffs": diffs}


def review_section(review: dict[str, Any] | None, similar: str | None) -> list[str]:
    """The report's section: the checks' verdict and the diffs against the example the delivery derives from."""
    if not review:
        return []
    lines = ["", "## Delivery review", ""]
    if review.get("skipped"):
        return lines + [f"Not reviewed: {review['skipped']}."]
    problems = review.get("problems") or []
    lines.append(f"{len(review.get('files') or [])} delivered file(s) checked (absolute paths, run id, literals "
                 "measured on the samples, launch size, weights): " + ("nothing found." if not problems else
                                                                        f"{len(problems)} problem(s):"))
    lines += [f"- {p}" for p in problems]
    for label, diff in (review.get("diffs") or {}).items():
        lines += ["", f"`{label}` against `{similar}`'s files:", "", "```diff", diff, "```"]
    return lines
