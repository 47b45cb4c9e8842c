"""Every command README.md, docs/ and CONTRIBUTING.md show is checked against the real program, so the docs cannot
drift from it.

The fenced shell blocks are read line by line (continuations joined, heredoc bodies skipped, comments and
redirections dropped, pipelines and ``&&`` split). A ``msmigrate …`` command is resolved through the real click
command tree: the subcommand must exist and its options and arguments must parse (an unknown option, a missing
argument or a bad value fails). The cheap ones — ``--help``, ``--version``, ``fixtures list``, ``fixtures
target``, and ``validate-config`` on a target an earlier line of the same block made — then run in a temporary
folder, each block in order, and must exit 0. Scripts the docs run (``bash scripts/…``, ``python scripts/…``,
``python benchmarks/…``) must exist and define every ``--option`` shown; pytest markers must be registered. YAML
blocks must parse, and a spec (or a fragment of one) must name only spec fields and validate.

The docs page of the run spec lists exactly the spec's fields, and the README stays a front door (≤ 250 lines,
every docs/ page linked, each page opening with its commands)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml
from typer.testing import CliRunner

from msmigrate.agent.config import RunSpec, unknown_key_error
from msmigrate.faces.cli import app

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
SHELLS = ("bash", "sh", "shell", "console")
PLACEHOLDER = re.compile(r"<[a-z_]+>")  # runs/<run_id>, <model>: a name the reader fills in
SEPARATORS = {"|", "||", "&&", ";", "&"}
REDIRECTS = {">", ">>", "<", "<<", "2>", "&>", ">&"}


@dataclass
class Command:
    page: str
    line: int
    block: int
    argv: list[str]

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {' '.join(self.argv)}"


def blocks(page: Path) -> list[tuple[str, int, str]]:
    """(language, first line number, body) of every fenced block."""
    text = page.read_text(encoding="utf-8")
    return [(m.group(1), text.count("\n", 0, m.start()) + 2, m.group(2)) for m in FENCE.finditer(text)]


def simple_commands(line: str) -> list[list[str]]:
    """The simple commands of one shell line, without comments, redirections and leading VAR=value words."""
    lexer = shlex.shlex(PLACEHOLDER.sub("X", line), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    out, current, skip = [], [], False
    for token in lexer:
        if skip:
            skip = False
        elif token in SEPARATORS:
            out.append(current)
            current = []
        elif token in REDIRECTS or token.startswith((">", "<")):
            if current and current[-1].isdigit():
                current.pop()  # the 2 of 2>file
            skip = token in REDIRECTS
        else:
            current.append(token)
    out.append(current)
    return [[t for i, t in enumerate(c) if not (re.fullmatch(r"\w+=.*", t) and all("=" in x for x in c[:i + 1]))]
            for c in out if c]


def shell_commands() -> list[Command]:
    found = []
    for page in PAGES:
        for index, (lang, start, body) in enumerate(blocks(page)):
            if lang not in SHELLS:
                continue
            lines, heredoc, pending = body.splitlines(), None, ""
            for offset, raw in enumerate(lines):
                if heredoc is not None:
                    heredoc = None if raw.strip() == heredoc else heredoc
                    continue
                if raw.rstrip().endswith("\\"):
                    pending += raw.rstrip()[:-1] + " "
                    continue
                line, pending = pending + raw, ""
                marker = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line)
                if marker:
                    heredoc = marker.group(1)
                for argv in simple_commands(line):
                    found.append(Command(str(page.relative_to(ROOT)), start + offset, index, argv))
    return found


COMMANDS = shell_commands()
MSMIGRATE = [c for c in COMMANDS if c.argv[0] == "msmigrate"]
ROOT_COMMAND = typer.main.get_command(app)


def resolve(argv: list[str]) -> tuple[list[str], Any, list[str]]:
    """(the subcommand path, its click command, the arguments left for it). Typer carries its own copy of click
    (``typer._click``), so groups are told by their ``commands`` table, not by ``isinstance``."""
    cmd, path, args = ROOT_COMMAND, [], list(argv)
    while hasattr(cmd, "commands") and args and not args[0].startswith("-"):
        sub = cmd.get_command(cmd.context_class(cmd), args[0])
        assert sub is not None, f"no command {' '.join(path + args[:1])!r}"
        path, cmd, args = path + [args[0]], sub, args[1:]
    return path, cmd, args


def test_the_docs_show_the_commands_of_every_face():
    shown = {tuple(resolve(c.argv[1:])[0]) for c in MSMIGRATE}
    assert {("run",), ("chat",), ("batch",), ("eval",), ("verify",), ("validate-config",), ("fixtures", "list"),
            ("fixtures", "target"), ("fixtures", "source")} <= shown
    assert len(MSMIGRATE) > 30


@pytest.mark.parametrize("command", MSMIGRATE, ids=str)
def test_each_msmigrate_command_names_a_real_subcommand_and_options(command):
    path, cmd, args = resolve(command.argv[1:])
    if {"--help", "--version"} & set(args):
        return  # eager options: they run below
    try:
        cmd.make_context(" ".join(["msmigrate", *path]), list(args))
    except Exception as exc:  # click's UsageError / BadParameter / NoSuchOption (typer's vendored click)
        if not hasattr(exc, "format_message"):
            raise
        pytest.fail(f"{command}: {exc.format_message()}")


def cheap(path: list[str], args: list[str], cwd: Path) -> bool:
    if {"--help", "--version"} & set(args) or path in (["fixtures", "list"], ["fixtures", "target"]):
        return True
    if path == ["validate-config"] and "--target" in args:
        return (cwd / args[args.index("--target") + 1]).is_dir()  # a target an earlier line of the block made
    return False


def test_the_cheap_commands_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    ran = []
    for command in MSMIGRATE:
        path, _, args = resolve(command.argv[1:])
        workdir = tmp_path / f"{Path(command.page).stem}-{command.block}"
        workdir.mkdir(exist_ok=True)
        if not cheap(path, args, workdir):
            continue
        monkeypatch.chdir(workdir)
        result = runner.invoke(app, command.argv[1:])
        assert result.exit_code == 0, f"{command}: exit {result.exit_code}\n{result.output[-2000:]}"
        ran.append(path)
    assert ["fixtures", "list"] in ran and ["validate-config"] in ran and ["fixtures", "target"] in ran


def script_options(path: Path) -> set[str]:
    return set(re.findall(r"--[a-z][\w-]*", path.read_text(encoding="utf-8")))


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.argv[0] in ("bash", "python")], ids=str)
def test_scripts_the_docs_run_exist_and_take_those_options(command):
    argv = command.argv[1:]
    if argv[:2] == ["-m", "pytest"]:
        markers = (ROOT / "pyproject.toml").read_text()
        for i, token in enumerate(argv):
            if token == "-m" and i + 1 < len(argv) and argv[i + 1] != "pytest":
                for name in re.findall(r"\w+", argv[i + 1]):
                    assert name in ("not", "and", "or") or f'"{name}:' in markers, f"{command}: marker {name}"
            elif token.startswith("tests/"):
                assert (ROOT / token.split("::")[0]).exists(), f"{command}: no {token}"
        return
    script = ROOT / argv[0]
    assert script.is_file(), f"{command}: no {argv[0]}"
    known = script_options(script)
    own = argv[1:argv.index("--")] if "--" in argv else argv[1:]  # after --: the command the script runs
    for option in (a.split("=")[0] for a in own if a.startswith("--")):
        assert option in known, f"{command}: {argv[0]} has no {option}"


def yaml_blocks() -> list[tuple[str, dict]]:
    out = []
    for page in PAGES:
        for lang, start, body in blocks(page):
            if lang == "yaml":
                out.append((f"{page.relative_to(ROOT)}:{start}", yaml.safe_load(body)))
    return out


@pytest.mark.parametrize("where, data", yaml_blocks(), ids=[w for w, _ in yaml_blocks()])
def test_yaml_blocks_parse_and_name_only_spec_fields(where, data, tmp_path):
    tasks = data if isinstance(data, list) else None
    if tasks is not None:  # an eval task file: its spec overrides are spec fields
        for task in tasks:
            assert unknown_key_error(task.get("spec") or {}, RunSpec, f"{where} spec") is None
        return
    assert isinstance(data, dict), where
    assert unknown_key_error(data, RunSpec, where) is None, unknown_key_error(data, RunSpec, where)
    full = {"source": "src", "target": "tgt", "model_name": "doc_model", **data}
    RunSpec.from_dict(full, tmp_path)  # raises on a bad value


def test_the_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    for target in re.findall(r"\]\(((?:docs/|CONTRIBUTING|benchmarks/)[^)#]+)", text):
        assert (ROOT / target).is_file(), target
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"docs/{page.name}" in text, f"README does not link {page.name}"
        body = page.read_text(encoding="utf-8")
        first_block, first_section = body.find("```"), body.find("\n## ")
        assert 0 <= first_block < (first_section if first_section >= 0 else len(body)), f"{page.name}: commands first"


def spec_fields(model: Any = RunSpec, prefix: str = "") -> set[str]:
    """Every field path of the run spec, nested models included (``launch.slurm.gres``)."""
    from pydantic import BaseModel

    out = set()
    for name, info in model.model_fields.items():
        out.add(prefix + name)
        for kind in (info.annotation, *getattr(info.annotation, "__args__", ())):
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                out |= spec_fields(kind, f"{prefix}{name}.")
    return out


def test_the_spec_page_lists_every_spec_field_and_no_other():
    text = (ROOT / "docs" / "spec.md").read_text(encoding="utf-8").split("## Fields")[1].split("\n## ")[0]
    listed = set(re.findall(r"^\| `([\w.]+)` \|", text, re.M))
    assert listed == spec_fields(), (f"missing from docs/spec.md: {sorted(spec_fields() - listed)}; "
                                     f"not spec fields: {sorted(listed - spec_fields())}")
