"""The run's own settings files, for the classify prompt.

Why: on the real-log corpus the LLM stage's abstentions mostly say the same thing — the excerpt leaves two owners
possible and the fact that decides is a setting the log does not show (is the path setting wrong or the file
missing, is the sequence limit cutting the sample, is an option turned on that the class cannot do). Inside a
migration run that fact is on disk: the training YAML and launch script the config phase wrote under
``examples/<name>/``. Showing them lets the model decide config (a value there explains the failure) or rule it out.
"""

from __future__ import annotations

from pathlib import Path

SETTINGS_SUFFIXES = (".yaml", ".yml", ".sh")  # not .json: the sample dataset lives there too, and it is data
MAX_FILE_CHARS = 3000  # a whole training YAML of the contract fits; a longer file is cut with a note
MAX_TOTAL_CHARS = 7000  # the prompt's settings section, all files together


def run_settings(target: Path, model_name: str) -> list[dict[str, str]]:
    """The YAML and shell files under ``<target>/examples/<model_name>/`` (path relative to the target, text cut to
    the limits above), sorted by path; [] when the folder does not exist yet (a gate failed before config ran)."""
    folder = Path(target) / "examples" / model_name
    if not folder.is_dir():
        return []
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in SETTINGS_SUFFIXES)
    shown: list[dict[str, str]] = []
    left = MAX_TOTAL_CHARS
    for path in files:
        if left <= 0:
            shown.append({"path": str(path.relative_to(target)), "text": "(not shown: the section's limit is reached)"})
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        limit = min(MAX_FILE_CHARS, left)
        if len(text) > limit:
            text = text[:limit] + f"\n... ({len(text) - limit} more characters not shown)"
        left -= limit
        shown.append({"path": str(path.relative_to(target)), "text": text})
    return shown
