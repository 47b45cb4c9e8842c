"""G3 on what the shell makes of the delivered launch script: the script dry-run through bash with its launcher
recorded (``tools/launch_dry_run.py``), the recorded argv parsed by the runtime's own torchrun parser
(``probes/launch_args.py``), and what torchrun would then open checked from the folder it would be started in.

No gate runs the delivered script (G4–G6 start the trainer themselves), and reading its lines cannot decide what
the shell hands torchrun: a quoted ``"$DISTRIBUTED_ARGS"`` is one word, so torchrun takes the whole argument block
for the script to run; a ``cd`` moves every relative path the script names. Checked per recorded launcher call:

- torchrun's parser accepts the argv (its own error message otherwise). An option left without its value is not
  judged: on this machine a variable expanded to nothing, which in a multi-node script is host state (a hostfile,
  ``hostname -I``) the user's nodes supply — the call is recorded as not examined;
- the training script it would run (unless ``-m`` / ``--no-python``: a module or a command) is a file, relative
  to the recorded cwd; a script word with whitespace in it is one shell word holding many (a quoted variable);
- every relative input path among the script's own arguments (``.py`` / ``.yaml`` / ``.yml`` / ``.json``, bare or as
  ``--flag=path``) is a file from that cwd. Absolute paths are the user's machine's business and not judged.

A finding names the script's line that starts the launcher and, when the cwd is not the checkout's root, the line
that changed it. Nothing is claimed where the dry run did not reach a launcher or the parser probe did not run: the
evidence says so (``examined: false``).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any, Callable

from msmigrate.tools.launch_dry_run import DryRun, dry_run

INPUT_SUFFIXES = (".py", ".yaml", ".yml", ".json")
_CD_LINE = re.compile(r"^\s*(?:cd|pushd)\b")
_LAUNCH_LINE = re.compile(r"\btorchrun\b|torch\.distributed\.(?:run|launch)\b")


def _line_of(text: str, pattern: re.Pattern[str]) -> tuple[int, str] | None:
    for i, line in enumerate(text.splitlines(), 1):
        if not line.lstrip().startswith("#") and pattern.search(line):
            return i, line.strip()
    return None


def _where(text: str, script: str, cwd: str | None) -> str:
    """Where the launcher line is, and the cd that moved the cwd (for the message)."""
    launch = _line_of(text, _LAUNCH_LINE)
    out = f"line {launch[0]} of {script} (`{launch[1][:90]}`)" if launch else script
    if cwd != ".":
        cd = _line_of(text, _CD_LINE)
        place = "outside the checkout" if cwd is None else f"in {cwd}/"
        out += f", started {place}" + (f" after line {cd[0]} (`{cd[1][:60]}`)" if cd else "")
    return out


def _input_paths(args: list[str]) -> list[str]:
    out = []
    for arg in args:
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if not value.startswith("-") and value.endswith(INPUT_SUFFIXES) and not value.startswith("/"):
            out.append(value)
    return out


def _valueless_option(parsed: dict[str, Any]) -> bool:
    """torchrun's parser rejected an option for want of its value (argparse's ``expected one argument``)."""
    return "expected one argument" in str(parsed.get("parse_error") or "")


def _finding(script: str, key: str, message: str) -> dict[str, Any]:
    return {"severity": "error", "code": "launch-dry-run", "path": script, "key": key, "value": None,
            "message": message}


def call_findings(parsed: dict[str, Any], cwd: str | None, target: Path, text: str,
                  script: str) -> list[dict[str, Any]]:
    """One recorded launcher call, as torchrun's parser read it, checked from its cwd."""
    where = _where(text, script, cwd)
    if parsed.get("parse_error"):
        return [_finding(script, "torchrun", f"{where}: torchrun's own parser rejects the arguments the shell hands "
                                             f"it: {parsed['parse_error']}")]
    base = None if cwd is None else Path(target) / cwd
    out = []
    if parsed.get("nproc_per_node_error"):
        out.append({**_finding(script, "--nproc_per_node", f"{where}: torchrun is handed --nproc_per_node "
                                f"{parsed.get('nproc_per_node')}, and its own resolution of that on this host refuses "
                                f"it ({parsed['nproc_per_node_error']}): no rank starts; give the process count as a "
                                f"number (the run's size, as NPUS_PER_NODE sets it)"), "code": "launch-size"})
    entry = str(parsed.get("training_script") or "")
    if entry and not parsed.get("module") and not parsed.get("no_python") and not entry.startswith("/"):
        if re.search(r"\s", entry.strip()) or entry != entry.strip():
            words = " ".join(entry.split())
            out.append(_finding(script, "training_script", f"{where}: torchrun is handed `{words[:100]}` as ONE "
                                f"word and takes it for the script to run (not a file): a quoted variable's whole "
                                f"value; leave the variable unquoted so the shell splits it into torchrun's "
                                f"arguments"))
        elif base is None or not (base / entry).is_file():
            out.append(_finding(script, "training_script", f"{where}: torchrun would run {entry}, which is not a "
                                f"file there (it is a path relative to the checkout's root): run the launcher from "
                                f"the root (drop the cd) or give paths that resolve from where it runs"))
    for path in _input_paths([str(a) for a in parsed.get("training_script_args") or []]):
        if base is None or not (base / path).is_file():
            out.append(_finding(script, path, f"{where}: the trainer is handed {path}, which is not a file from "
                                f"the folder torchrun starts in: run the launcher from the checkout's root (drop "
                                f"the cd) or give paths that resolve from where it runs"))
    return out


def _changed_lines(text: str, reference: str) -> list[str]:
    """The script's lines the reference does not have, in order (blank lines and comments left out)."""
    theirs = set(reference.splitlines())
    return [ln.strip() for ln in text.splitlines()
            if ln not in theirs and ln.strip() and not ln.lstrip().startswith("#")]


def stop_finding(script_path: str, text: str, result: DryRun, reference: tuple[str, str],
                 reached: DryRun) -> dict[str, Any]:
    """The delivered script stops before its launcher on this machine where ``reference`` (what it was derived
    from, run in its place on the same machine) reaches the launcher: what the delivered script changed stops it."""
    said = result.stderr_tail[-200:].strip()
    changed = _changed_lines(text, reference[1])
    return _finding(script_path, "script", (
        f"{script_path} exits {result.returncode} before it reaches torchrun on this machine "
        f"({'saying: ' + said if said else 'printing nothing'}), where {reference[0]}, run in its place, "
        f"reaches torchrun ({len(reached.calls)} launcher call(s)): a line the delivered script "
        f"changed stops it" + (f" — its lines that one does not have: "
                               + "; ".join(f"`{ln[:80]}`" for ln in changed[:4]) if changed else "")))


_USE_ENV = ("--use-env", "--use_env")
LEGACY_LAUNCHER = "torch.distributed.launch"


def launcher_words(launcher: str, argv: list[str]) -> tuple[list[str], list[str]]:
    """(the argv torchrun's parser reads, what the launcher puts ahead of the script's own arguments): the legacy
    ``torch.distributed.launch`` takes ``--use-env`` on top of torchrun's options and, without it, hands the script
    ``--local-rank=<n>`` first (torch.distributed.run's ``config_from_args``)."""
    if not launcher.endswith(LEGACY_LAUNCHER):
        return argv, []
    return [a for a in argv if a not in _USE_ENV], ([] if any(a in _USE_ENV for a in argv) else ["--local-rank=0"])


def trainer_findings(parsed: dict[str, Any], ahead: list[str], cwd: str | None, text: str, script: str,
                     read: Callable[[list[str], str], dict[str, Any] | None] | None,
                     trainer: str | None) -> list[dict[str, Any]]:
    """What the trainer makes of the arguments it would be handed (``read``: its own configuration loading on them,
    the ``trainer_args`` probe): rejected, or arguments after the YAML it leaves without effect. Only for a call that
    runs ``trainer`` (the entry G4–G6 launch themselves) from inside the checkout."""
    if read is None or cwd is None or trainer is None or \
            posixpath.normpath(str(parsed.get("training_script") or "")) != posixpath.normpath(trainer):
        return []
    args = [*ahead, *[str(a) for a in parsed.get("training_script_args") or []]]
    said = read(args, cwd)
    if not said:
        return []
    where = _where(text, script, cwd)
    shown = " ".join(args)[:160]
    added = (f" ({LEGACY_LAUNCHER} without --use-env puts {ahead[0]} ahead of the script's own arguments; torchrun "
             f"passes the rank in LOCAL_RANK)") if ahead else ""
    if not said.get("loaded"):
        return [_finding(script, "trainer-arguments", f"{where}: the trainer would be handed `{shown}`{added}, which "
                         f"its own configuration loading rejects: {str(said.get('rejected'))[:400]}")]
    if said.get("overrides_take_effect") is False:
        return [_finding(script, "trainer-arguments", f"{where}: the trainer would be handed "
                         f"`{' '.join(said.get('other_args') or [])[:120]}` after its YAML, which its configuration "
                         f"loading leaves without effect (the parsed configuration is the YAML's alone): set those "
                         f"values in the YAML")]
    return []


def dry_run_findings(script_path: str, target: Path, parse: Callable[[list[str]], dict[str, Any] | None],
                     run: Callable[..., DryRun] = dry_run, reference: tuple[str, str] | None = None,
                     read: Callable[[list[str], str], dict[str, Any] | None] | None = None,
                     trainer: str | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(findings, what was examined) for the delivered script ``script_path`` of ``target``; ``parse``: the
    runtime's torchrun parser on an argv (None: it could not run); ``reference``: (what, text) of the script it was
    derived from: when the delivered script reaches no launcher, that text is dry-run in its place, and a reference
    that does reach one makes the stop a finding (what stops both is this machine's, not the script's); ``read``
    and ``trainer``: the trainer's own reading of what a call of ``trainer`` hands it (``trainer_findings``)."""
    script = Path(target) / script_path
    text = script.read_text(errors="replace")
    result = run(script, Path(target))
    facts: dict[str, Any] = {"examined": False, "calls": len(result.calls), "returncode": result.returncode,
                             "error": result.error}
    if not result.calls:
        facts["why_not"] = result.error or (f"the script reached no torchrun on this machine (exit "
                                            f"{result.returncode}; {result.stderr_tail[-200:].strip()})")
        if reference is None or result.error or reference[1] == text:
            return [], facts
        reached = run(script, Path(target), text=reference[1])
        facts["reference"] = {"from": reference[0], "calls": len(reached.calls), "returncode": reached.returncode}
        if not reached.calls:
            return [], facts
        facts.update(examined=True, why_not=None)
        return [stop_finding(script_path, text, result, reference, reached)], facts
    out, parsed_calls = [], []
    for call in result.calls:
        words, ahead = launcher_words(call.launcher, call.argv)
        parsed = parse(words)
        if parsed is None or _valueless_option(parsed):
            facts.setdefault("not_examined", []).append(
                {"argv": call.argv[:40], "why": parsed["parse_error"] if parsed else "the parser did not run"})
            continue
        parsed_calls.append({"launcher": call.launcher, "cwd": call.cwd, "argv": call.argv[:40],
                             "training_script": parsed.get("training_script"),
                             "training_script_args": (parsed.get("training_script_args") or [])[:40],
                             "local_world_size": parsed.get("local_world_size")})
        out += call_findings(parsed, call.cwd, target, text, script_path)
        out += trainer_findings(parsed, ahead, call.cwd, text, script_path, read, trainer)
    out += output_findings(result.stderr_tail, text, script_path) + background_findings(text, script_path)
    facts.update(examined=bool(parsed_calls), parsed=parsed_calls)
    if not parsed_calls:
        facts["why_not"] = "; ".join(n["why"] for n in facts.get("not_examined", []))[:300]
    return out, facts


# what tee and bash print when a file the script writes its output to cannot be opened
_UNWRITABLE = re.compile(r"^(?:tee: (?P<tee>.+?)|.*?: line (?P<line>\d+): (?P<redirect>[^:\n]+)): "
                         r"(?P<why>No such file or directory|Permission denied|Read-only file system|Is a directory)$",
                         re.M)
_TEE_LINE = re.compile(r"\|\s*tee\b")
_FILE_REDIRECT = re.compile(r"(?:^|[^>&\d<])\d?>>?\s*(?!&)[^\s&|;<>]+")  # `> f`, `2>> f`; not `2>&1`


def output_findings(stderr: str, text: str, script: str) -> list[dict[str, Any]]:
    """A file the script sends its launch's output to (``| tee FILE``, ``> FILE``) that cannot be opened on this
    host, as the dry run's own shell met it: the training log is lost, and behind ``| tee`` the pipeline's exit
    status is tee's, not the trainer's (a failed training reads as success without ``pipefail``)."""
    out = []
    lines = text.splitlines()
    for m in _UNWRITABLE.finditer(stderr or ""):
        path = m.group("tee") or m.group("redirect")
        if m.group("line") and not (0 < int(m.group("line")) <= len(lines) and
                                    _FILE_REDIRECT.search(lines[int(m.group("line")) - 1])):
            continue  # bash words a `source` of a missing file the same way: only a redirect's line is one
        line = _line_of(text, _TEE_LINE) if m.group("tee") else None
        at = f"line {line[0]} of {script} (`{line[1][:90]}`)" if line else \
            f"line {m.group('line')} of {script}" if m.group("line") else script
        out.append(_finding(script, "tee" if m.group("tee") else "redirect",
                            f"{at} writes the launch's output to {path}, which cannot be opened on this host "
                            f"({m.group('why')}): the training log is lost" +
                            (" and the pipeline's exit status is tee's, not the trainer's" if m.group("tee") else "")
                            + "; write it under a folder the script creates (mkdir -p logs; … | tee logs/…)"))
    return out[:2]


_BACKGROUND = re.compile(r"(?<![&|])&\s*(?:#.*)?$")
_WAIT = re.compile(r"^\s*wait\b", re.M)


def background_findings(text: str, script: str) -> list[dict[str, Any]]:
    """The launcher started in the background (its command ends with a lone ``&``, ``nohup`` or not) with no
    ``wait`` after it: the script returns at once with status 0 whatever training then does — a scheduler's job ends
    and frees the node under it, and no caller sees the trainer's failure."""
    joined = text.replace("\\\n", " ")
    lines = joined.splitlines()
    for i, line in enumerate(lines):
        if line.lstrip().startswith("#") or not _LAUNCH_LINE.search(line) or not _BACKGROUND.search(line):
            continue
        if _WAIT.search("\n".join(lines[i + 1:])):
            return []
        at = _line_of(text, _LAUNCH_LINE)
        where = f"line {at[0]} of {script} (`{at[1][:90]}`)" if at else script
        return [_finding(script, "&", f"{where} starts the launcher in the background (`&`) and nothing waits for "
                                      f"it: the script returns at once with exit status 0 whatever training does (a "
                                      f"scheduler ends the job and frees the node under it; a failure is never "
                                      f"reported); run it in the foreground (drop the `&` and `nohup`), or `wait` "
                                      f"for it")]
    return []


_QUOTED_EXPANSION = re.compile(r'"(\$\{?[A-Za-z_]\w*\}?)"')


def repair_candidates(text: str) -> list[tuple[str, str]]:
    """(what was changed, the script changed) for what a dry-run finding can come from, each a small edit of the
    script's own lines: the quotes around a variable's expansion on the launcher's line taken off (one such
    expansion only: with several, which one held the argument block is not known), every ``cd`` / ``pushd`` line
    before the launcher removed. A candidate is a repair only once the dry run of the changed script finds
    nothing (``verified_repair``)."""
    lines = text.splitlines(keepends=True)
    launch = _line_of(text, _LAUNCH_LINE)
    if launch is None:
        return []
    at = launch[0] - 1
    out = []
    quoted = _QUOTED_EXPANSION.findall(lines[at])
    if len(quoted) == 1:
        fixed = lines[:at] + [_QUOTED_EXPANSION.sub(r"\1", lines[at])] + lines[at + 1:]
        out.append((f"line {at + 1}: {quoted[0]} unquoted", "".join(fixed)))
    cds = [i for i in range(at) if _CD_LINE.search(lines[i]) and not lines[i].lstrip().startswith("#")]
    if cds:
        out.append((f"line{'s' * (len(cds) > 1)} {', '.join(str(i + 1) for i in cds)} (cd) removed",
                    "".join(ln for i, ln in enumerate(lines) if i not in cds)))
    return out


def verified_repair(script_path: str, target: Path, parse: Callable[[list[str]], dict[str, Any] | None],
                    run: Callable[..., DryRun] = dry_run) -> tuple[str, str] | None:
    """The first repair candidate whose dry run (the changed text in the script's place) is examined and finds
    nothing; None when none is."""
    script = Path(target) / script_path
    for what, text in repair_candidates(script.read_text(errors="replace")):
        found, facts = dry_run_findings(script_path, target, parse,
                                        run=lambda s, r, text=text: run(s, r, text=text))
        if facts.get("examined") and not found:
            return what, text
    return None
