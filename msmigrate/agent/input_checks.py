"""Checks of what the user gave a run, made before anything touches the target (``Run`` calls ``spec_problem``
before it creates the run folder or the work tree) or at G0 (``data_record_problems``, ``interpreter_problem``
through the precheck). Each problem is one line naming the input; a spec mistake is exit 2 in the CLI.

- ``policy: replay`` needs a ``replay_trajectory`` that exists and records decisions (it used to fail only after
  the work tree and branch were made, leaving both behind);
- ``source_step`` (``--source-step FILE.py:function``) must name a file that parses and a top-level function of
  one of the two training-step signatures (``tools/source_step.py``), read statically: the user's code runs only in
  the target runtime;
- ``runtime_python`` must exist and be executable ("no such interpreter: …"); that it is a Python is checked at
  G0 by running it (``tools/runtime.interpreter_problem``);
- every sample-data record must be a sample — an object carrying text: a conversation (a list of turns, each with
  a role and a content) or, in the source's own format (DESIGN decision 14: a VQA record's question and answer),
  text fields — and every media path it names must resolve, as the datasets resolve it (absolute, or relative to
  the data file's folder = ``dataset_dir``); the error gives the record's index.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from msmigrate.agent.routes.fsdp2.draft_config import ROLE_PAIRS
from msmigrate.tools.runtime import executable_problem
from msmigrate.tools.source_step import step_problem

MEDIA_KEYS = ("images", "videos", "audios", "image", "video", "audio")
CONVERSATION_KEYS = ("messages", "conversations")
MAX_LISTED = 5  # problems named one by one; the rest are counted


class InputError(ValueError):
    """What the user gave cannot run (a spec mistake): one line naming the input."""


def spec_problem(spec: Any, runtime_python: str | None) -> str | None:
    """The first problem of ``spec`` that must stop the run before it starts, or None."""
    if spec.policy == "replay":
        path = spec.replay_trajectory
        if path is None:
            return "policy 'replay' needs replay_trajectory: the trajectory.jsonl of the run to replay"
        problem = trajectory_problem(Path(path))
        if problem:
            return problem
    problem = step_problem(getattr(spec, "source_step", None))
    if problem:
        return problem
    return executable_problem(runtime_python or "")


def trajectory_problem(path: Path) -> str | None:
    if not path.is_file():
        return f"replay_trajectory {path}: no such file"
    decisions = 0
    try:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if line.strip():
                    record = json.loads(line)
                    decisions += isinstance(record, dict) and record.get("kind") == "decision"
    except (OSError, UnicodeDecodeError) as exc:
        return f"replay_trajectory {path} cannot be read: {exc}"
    except json.JSONDecodeError as exc:
        return f"replay_trajectory {path} line {n} is not JSON ({exc.msg}): not a trajectory.jsonl"
    if not decisions:
        return f"replay_trajectory {path} records no policy decisions to replay"
    return None


# ------------------------------------------------------------------------------------------------ sample data

def read_records(path: Path) -> list[Any] | None:
    """The records of a JSON (a list, or one object) or JSON-lines file; None when it is neither."""
    text = path.read_text(encoding="utf-8")
    try:
        records = json.loads(text)
    except json.JSONDecodeError:
        try:
            records = [json.loads(ln) for ln in text.splitlines() if ln.strip()]
        except json.JSONDecodeError:
            return None
    return [records] if isinstance(records, dict) else records if isinstance(records, list) else None


def record_problem(record: Any, base: Path) -> str | None:
    """Why one record is not a sample msmigrate can train on, or None."""
    if not isinstance(record, dict):
        return f"is a {type(record).__name__}, not an object"
    # the framework's default names first; else any list of objects (a config's attr may name another key)
    key = next((k for k in CONVERSATION_KEYS if k in record), None) or next(
        (k for k, v in record.items() if isinstance(v, list) and v and all(isinstance(t, dict) for t in v)), None)
    if key is None:  # the source's own record format: text fields besides the media
        if not any(isinstance(v, str) and v.strip() for k, v in record.items() if k not in MEDIA_KEYS):
            return f"has no text (no conversation such as {' or '.join(CONVERSATION_KEYS)}, no text field); " \
                   f"keys: {sorted(map(str, record))[:8]}"
        return media_problem(record, base)
    turns = record[key]
    if not isinstance(turns, list) or not turns:
        return f"{key} is not a non-empty list of turns"
    for t, turn in enumerate(turns):
        if not isinstance(turn, dict):
            return f"{key}[{t}] is a {type(turn).__name__}, not a turn object"
        pair = next(((r, c) for r, c, *_ in ROLE_PAIRS if r in turn), None)
        if pair is None:  # role names of the user's own (a config's attr maps them): only the shape is checked
            if not any(isinstance(v, (str, list)) for v in turn.values()):
                return f"{key}[{t}] has no text"
            continue
        role, content = pair
        if not isinstance(turn[role], str):
            return f"{key}[{t}].{role} is not a string"
        if content not in turn or not isinstance(turn[content], (str, list)):
            return f"{key}[{t}] has no {content} text"
    return media_problem(record, base)


def media_problem(record: dict[str, Any], base: Path) -> str | None:
    """Why a media path of ``record`` does not resolve, or None."""
    for media in MEDIA_KEYS:
        if media not in record or record[media] is None:
            continue
        paths = [record[media]] if isinstance(record[media], str) else record[media]
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            return f"{media} is not a list of paths"
        for p in paths:
            where = Path(p) if os.path.isabs(p) else base / p
            if not where.is_file():
                return f"{media} path {p!r} does not resolve (looked at {where})"
    return None


def data_record_problems(path: Path) -> list[str]:
    """One line for the data file when records are not samples or media do not resolve, naming the first records
    by index (0-based, as in the file); [] when every record is fine or the file is not records at all (that is
    ``prepare.data_file_problems``'s finding)."""
    records = read_records(path)
    if not records:
        return []
    bad = [(i, why) for i, r in enumerate(records) if (why := record_problem(r, path.parent))]
    if not bad:
        return []
    named = "; ".join(f"record {i} {why}" for i, why in bad[:MAX_LISTED])
    more = f" (+{len(bad) - MAX_LISTED} more records)" if len(bad) > MAX_LISTED else ""
    return [f"sample data {path}: {len(bad)} of {len(records)} records unusable: {named}{more}"]
