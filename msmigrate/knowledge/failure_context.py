"""A failed gate read with the run's own context: which of this run's artifacts the failure passes through.

The excerpt alone often leaves two owners possible; inside a run, facts that decide are on disk. This module maps
them onto the owner definitions (:mod:`msmigrate.knowledge.owners`) — a rule here states a definition applied to
the run, never a table fitted to logs:

- **frames**: every ``file:line`` the failure text names (Python tracebacks, the probes' ``raised in … called
  from …`` notes) mapped to this run's artifacts — the model plugin package (model), the data path (the dataset
  plugin and the target's data package with its templates, mm_plugins and collators, the training records and media:
  data), the training YAML and launch script (config). The innermost such frame is the run's own code nearest the
  error; frames of installed packages or of the framework's other code decide nothing.
- **config loading**: a failure raised while the framework loads the YAML (a YAML parser error, the framework's
  argument classes rejecting a value) is config, whichever gate's probe loaded it first (G1 and G2 load the YAML
  before G3 validates it).
- **keys**: a key of the run's YAML named in the failure's error line (a specific key: with an underscore or a dot,
  not a word like ``model``) points at the setting: config.
- **the runtime**: an installed package that cannot work in the target runtime (a release another package
  rejects, an extension built against another numpy ABI, a missing symbol): environment.
- **the host**: an operating-system error of the host the run's files cannot cause (disk full, read-only file
  system, a network interface that does not exist, the process killed by SIGKILL) with no frame of the run's own
  code: environment. So is the CPU allocator refusing a size the host's physical memory holds (the memory is held
  elsewhere; a size beyond the host is a wrong size, whose code computed it decides).
- **the runtime's own setup**: a probe's 1-rank process-group setup (torch.distributed alone, before any code of
  the target or the run) failing: environment. An installed package failing to import a name from its own package
  (torch's module importing ``torch.distributed.fsdp.fully_shard``) is its release, not the caller: environment.
- **the runtime's environment**: a value the error quotes that a variable the target's own code reads holds in the
  runtime's environment (G0's env probe, a rank's view; not set by the launch script or the YAML); a warning raised
  as an exception under the runtime's ``PYTHONWARNINGS=error``; a collective backend failing to start while the
  runtime sets that backend's own variables; an image error the source's own processor met in the runtime on
  records whose files decode outside it: environment, naming the variable or the library.
- **the interpreter's switches**: a docstring error while a rank's environment sets PYTHONOPTIMIZE >= 2 (G0's env
  probe), which strips docstrings: environment (``python -OO`` in the launch script: config). Code outside the run's
  artifacts failing to import a name from an installed package, with no frame of the run's own code: environment.
- **a case's premise contradicted**: a config case whose own YAML fix the run's YAML already holds did not come from
  that setting (the innermost non-settings frame of the run's code decides); an attention implementation refused for
  a class whose body in the plugin sets the declaring flag False is the plugin's.
- **a media path resolved elsewhere**: a relative file an error could not open that exists in the training records'
  folder: the YAML's path setting that resolves it is wrong (config), not the file (data).
- **derived data settings**: a config case at G2 that names YAML data settings G2 found to be what the migration
  derives from the records' own first sample and the plan: the records contradict them (data).
- **the loss's graph**: backward refused a loss with no autograd graph. Only two artifacts can cut it: the YAML
  freezing every trainable part (config) or the model's forward returning a loss not computed from its parameters
  (model); the YAML's own freeze list says which.
- **last change**: the phase whose artifact this run changed last before the failing gate (its own commits only;
  a verify run has none), when nothing above decides.

Each answer names what to change (the file and line, or the key), for the diagnosis.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from msmigrate.knowledge.host_files import host_file_error

# `File "/x/y.py", line 12, in f` (tracebacks) and `/x/y.py:12 in f` (the probes' raised-in / called-from notes)
_FRAME = re.compile(r'File "(?P<a>[^"]+)", line (?P<al>\d+)|(?P<b>[\w./\\-]+\.(?:py|yaml|yml|sh|json))'
                    r':(?P<bl>\d+)')
_SITE = re.compile(r"[/\\](?:site|dist)-packages[/\\]|[/\\]lib[/\\]python\d")
# the YAML parser's own errors, and the framework's argument classes rejecting what the YAML gave them
_YAML_LOAD = re.compile(r"yaml\.(?:scanner|parser|constructor|composer)\.\w+Error|found character '\\t'|"
                        r"while (?:scanning|parsing) a (?:block|simple|plain)|mapping values are not allowed here")
_ARGS_REJECTED = re.compile(r"\d+ validation errors? for \w*Arguments|validation error for \w*Arguments")
# operating-system errors of the host: the errno names of a full / read-only / failing disk, a missing interface
_HOST = re.compile(r"\[Errno (?:28|30|122|5|24|12)\]|No space left on device|Read-only file system|Disk quota exceeded|"
                   # the process's own limits: open files (EMFILE), memory (ENOMEM), threads / processes (EAGAIN at
                   # thread start), and a host without a usable temporary folder
                   r"Too many open files|Cannot allocate memory|can't start new thread|"
                   r"pthread_create failed|No usable temporary directory found|"
                   r"Input/output error|[Nn]o (?:such )?(?:network )?interface|Unable to find address for|"
                   r"getifaddrs|ifname|died with <?Signals\.SIGKILL|exitcode\s*:\s*-9\b|signal 9 \(SIGKILL\)|"
                   # a process killed by SIGBUS: a mapped file or shared-memory segment the host could not back
                   r"killed by signal: Bus error|Signals\.SIGBUS|signal 7 \(SIGBUS\)|"
                   # the dynamic loader cannot map a library: the process's address-space limit (ulimit -v) or memory,
                   # or a library loaded late that needs static TLS the process has no room left for (LD_PRELOAD it)
                   r"failed to map segment from shared object|cannot allocate memory in static TLS block|"
                   # the kernel ending a process at a resource limit of the shell that started it (RLIMIT_CPU: SIGXCPU,
                   # 24; RLIMIT_FSIZE: SIGXFSZ, 25), in torchrun's, Python's and the shell's words
                   r"Signals\.SIGX(?:CPU|FSZ)|\(SIGX(?:CPU|FSZ)\)|killed by SIGX(?:CPU|FSZ)|exitcode\s*:\s*-2[45]\b|"
                   r"CPU time limit exceeded|File size limit exceeded")
_LIMIT = re.compile(r"SIGX(?:CPU|FSZ)|-2[45]\b|time limit exceeded|size limit exceeded")
# a process ended by SIGTERM (torch.distributed's wording for a rank or its agent), and the words of the launcher
# (tools/launcher/run.py) and the probes (tools/runtime.py) when they stop a launch themselves at a time limit
_SIGTERM = re.compile(r"Signal 15 \(SIGTERM\)|Signals\.SIGTERM|exitcode\s*:?\s*-15\b|signal 15 \(SIGTERM\)")
_OWN_STOP = re.compile(r"(?i)timed out|timeout|no output for|stopped by|stopped_fatal|cancelled")
# an installed package that cannot work in this runtime: a release another package rejects, an extension built
# against another ABI, a shared library of another system release
_RUNTIME_BROKEN = re.compile(r"is required for a normal functioning of this module, but found|"
                             r"compiled using NumPy 1\.x cannot be run in NumPy 2|Importing the numpy C-extensions "
                             r"failed|undefined symbol: |version `GLIBC\w*_[\d.]+' not found")
# a module the runtime cannot import at all: not installed, or its install broken (``None`` left in sys.modules)
_PACKAGE_ABSENT = re.compile(r"ModuleNotFoundError: (?:No module named '(?P<a>[\w.]+)'|import of (?P<b>[\w.]+) "
                             r"halted; None in sys\.modules)")
# autograd refusing a loss that has no graph (torch's wording for backward on a tensor without grad_fn)
# a process a signal of compiled code ended (the probe runner's words), or Python's own fatal-error dump of one
_NATIVE_DEATH = re.compile(r"killed by SIG(?:SEGV|BUS|ILL|ABRT|FPE)\b|Fatal Python error: (?:Segmentation fault|Bus error|"
                           r"Aborted|Illegal instruction|Floating point exception)")
_NO_GRAPH = re.compile(r"does not require grad and does not have a grad_fn")
# the probes' own words for a failure of the runtime's setup itself (tools/probes/_single_rank.py's RUNTIME_SETUP):
# torch.distributed alone, before the target's or the run's code runs
RUNTIME_SETUP_SAID = "the runtime's own 1-rank process-group setup failed"
# the CPU allocator refusing an allocation (torch's c10 message on every platform), with the size it was asked for
_CPU_ALLOC = re.compile(r"DefaultCPUAllocator: (?:not enough memory|can't allocate memory)[^\n]*?"
                        r"(?:allocate (?P<bytes>\d+) bytes)")
_GENERIC_KEYS = {"model", "data", "training", "parallel", "features", "tools", "template", "dataset", "plugin",
                 "images", "messages", "load", "save", "seed", "lr", "stage", "role_tag", "content_tag"}


@dataclass(frozen=True)
class Artifacts:
    """This run's artifacts, as paths relative to the target root (``records``: absolute paths of the data)."""
    model: tuple[str, ...] = ()
    data: tuple[str, ...] = ()
    config: tuple[str, ...] = ()
    records: tuple[str, ...] = ()
    yaml_keys: dict[str, str] = field(default_factory=dict)  # leaf key -> dotted path of the run's YAML
    yaml_values: dict[str, str] = field(default_factory=dict)  # dotted path -> the YAML's scalar value, as text
    frozen: tuple[str, ...] | None = None  # what the YAML freezes (model.freeze); None: no YAML was read
    # the target runtime's communication variables as G0's env probe read them (GLOO_SOCKET_IFNAME, MASTER_ADDR …)
    environment: dict[str, str] = field(default_factory=dict)
    host_memory: int | None = None  # bytes of physical memory of the host the gates run on
    # variables the target's own code reads (os.getenv) that the runtime's environment sets to another value than
    # the code's default, as G0's env probe read them: name -> (the value, the code's default or None)
    runtime_env: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    # the interpreter's own switches (PYTHONWARNINGS …) a rank's environment sets, as G0's env probe read them
    interpreter_env: dict[str, str] = field(default_factory=dict)

    def owner_of(self, path: str) -> str | None:
        """model / data / config for a file of this run, None for any other file (installed, framework, stdlib)."""
        norm = path.replace("\\", "/")
        if any(norm == r or norm.startswith(r.rstrip("/") + "/") for r in self.records):
            return "data"
        if _SITE.search(norm):
            return None
        for owner, roots in (("model", self.model), ("config", self.config), ("data", self.data)):
            for root in roots:
                root = root.strip("/")
                if norm == root or norm.endswith("/" + root) or f"/{root}/" in f"/{norm}" or \
                        norm.startswith(root + "/"):
                    return owner
        return None


@dataclass(frozen=True)
class ContextVerdict:
    owner: str
    rule: str  # frames | config-loading | key | loss-graph | runtime | host | last-change | plugin-import | registration
    # | gate-remedy | attention-class | attention-flag | fix-in-place | source-batch | derived-settings | signature
    reason: str  # in words, naming the file:line or the key to change

    def to_dict(self) -> dict[str, str]:
        return {"owner": self.owner, "rule": self.rule, "reason": self.reason}


def frames(text: str) -> list[tuple[str, int]]:
    """Every (file, line) the text names, in order."""
    found = []
    for m in _FRAME.finditer(text):
        path, line = (m.group("a"), m.group("al")) if m.group("a") else (m.group("b"), m.group("bl"))
        found.append((path, int(line)))
    return found


_QUOTED_PATH = re.compile(r"""['"](/[^'"\n]+)['"]""")


def run_frames(text: str, artifacts: Artifacts) -> list[tuple[str, int, str]]:
    """The frames in this run's own artifacts: (file, line, owner), in text order; a quoted path of the training
    records or media (a file an error names) counts as a data frame (line 0)."""
    found = [(p, n, o) for p, n in frames(text) for o in [artifacts.owner_of(p)] if o]
    named = [(m.group(1), 0, "data") for m in _QUOTED_PATH.finditer(text)
             if artifacts.records and artifacts.owner_of(m.group(1)) == "data"]
    return found + [n for n in named if n[0] not in {f[0] for f in found}]


_INPUT_DUMP = re.compile(r"\[type=[^\]]*\]|input_value=\{.*")  # pydantic echoes the whole section it was given


_PYDANTIC_HEAD = re.compile(r"\d+ validation errors? for ")
# the forward probe's own label of the meta-init path it ran, "fresh init (no load: the trainer's
# init_model_with_meta_device without training.load, ...)": it describes the probe, it quotes no setting of the run
_PROBE_PATH = re.compile(r"(fresh init|resumed load) \([^()]*\)")
_PYDANTIC_LOC = re.compile(r"[A-Za-z_][\w.\[\]]*")  # a field location line under that header (`training.lr`)


def _error_lines(text: str) -> list[str]:
    """The lines that state the error, and under pydantic's `N validation errors for X` header the field
    location lines it prints on their own (the key the error is about)."""
    said, in_pydantic = [], False
    for line in text.splitlines():
        if re.search(r"(?i)\b\w*(?:error|exception)\b|failed|not registered|invalid", line):
            said.append(_PROBE_PATH.sub(r"\1", _INPUT_DUMP.sub("", line)).strip())
            in_pydantic = bool(_PYDANTIC_HEAD.search(line)) or (in_pydantic and line[:1].isspace())
        elif in_pydantic and _PYDANTIC_LOC.fullmatch(line.strip()) and not line[:1].isspace():
            said.append(line.strip())
        elif in_pydantic and not line[:1].isspace():
            in_pydantic = False
    return said


def keys_valued(text: str, artifacts: Artifacts) -> list[str]:
    """Keys of the run's YAML whose value an error line quotes (`Learning rate 0.0001 < minimum lr 0.001` names
    lr and lr_min by their values): numbers with a decimal point or exponent and names of 4+ characters, not as a
    part of a path; a value several keys share names none of them."""
    said = "\n".join(_error_lines(text))
    by_value: dict[str, list[str]] = {}
    for dotted, value in artifacts.yaml_values.items():
        if re.fullmatch(r"-?\d*\.\d+(?:e-?\d+)?|-?\d+e-?\d+|[A-Za-z][\w.-]{3,}", value) and \
                value.lower() not in ("true", "false", "none", "null", "auto"):
            by_value.setdefault(value, []).append(dotted)
    return [keys[0] for value, keys in by_value.items() if len(keys) == 1 and
            # a value inside a path ('images/x.png' for the key valued `images`) is no quote of it
            re.search(rf"(?<![\w./-]){re.escape(value)}(?![\w/-])", said)]


def keys_named(text: str, artifacts: Artifacts) -> list[str]:
    """Specific keys of the run's YAML the failure's error lines name (a dotted path, or a leaf with '_')."""
    said = "\n".join(_error_lines(text))
    named = []
    for leaf, dotted in artifacts.yaml_keys.items():
        # the whole dotted path is specific even for a generic leaf (`training.lr`); a leaf alone only with a '_'
        if "." in dotted and re.search(rf"(?<![\w.]){re.escape(dotted)}(?![\w])", said) or \
                (leaf not in _GENERIC_KEYS and "_" in leaf and re.search(rf"(?<![\w]){re.escape(leaf)}(?![\w])", said)):
            named.append(dotted)
    return named


def context_owner(text: str, artifacts: Artifacts, changed_last: str | None = None) -> ContextVerdict | None:
    """The owner the run's context decides for a failure text, or None when it decides nothing."""
    if _YAML_LOAD.search(text) or _ARGS_REJECTED.search(text):
        keys = keys_named(text, artifacts)
        where = f" (key {', '.join(keys[:3])})" if keys else ""
        what = "the YAML parser rejected it" if _YAML_LOAD.search(text) else \
            "the framework's argument classes rejected a value"
        return ContextVerdict("config", "config-loading",
                              f"the failure is raised while loading the training YAML{where}: {what}; fix "
                              f"{_names(artifacts.config[:1]) or 'the YAML'}{where}")
    damaged = host_file_error(text)
    if damaged:
        return ContextVerdict("environment", "host", damaged)
    own = run_frames(text, artifacts)
    if own:
        path, line, owner = own[-1]
        return ContextVerdict(owner, "frames",
                              f"the innermost frame of this run's own code is {path}:{line} ({_what(owner)}); "
                              f"the fix changes that file")
    if RUNTIME_SETUP_SAID in text:
        return ContextVerdict("environment", "runtime",
                              "the failing step is the runtime's own process-group setup (torch.distributed alone), "
                              "which runs none of the run's code: the installed torch or the host cannot start it; "
                              "install a torch build with the gloo backend / fix the host's network"
                              + variables_valued(text, artifacts))
    memory = host_memory_shortage(text, artifacts.host_memory)
    if memory:
        return ContextVerdict("environment", "host", memory)
    native = _NATIVE_DEATH.search(text)
    if native:
        return ContextVerdict("environment", "host",
                              f"a process died in compiled code (`{native.group(0)}`) with no frame of the run's own "
                              f"code on its stack: the runtime's binary packages or the node (memory, driver) — run "
                              f"it again on another node, or reinstall the runtime's binary packages; no migration "
                              f"artifact changes")
    if _NO_GRAPH.search(text) and artifacts.frozen is not None:
        return loss_graph_owner(artifacts)
    keys = keys_named(text, artifacts)
    if keys:
        return ContextVerdict("config", "key", f"the error names the setting {', '.join(keys[:3])} of "
                                               f"{_names(artifacts.config[:1]) or 'the YAML'}: change it there")
    absent = _PACKAGE_ABSENT.search(text)
    if absent and not _in_run(absent.group("a") or absent.group("b"), artifacts):
        name = absent.group("a") or absent.group("b")
        return ContextVerdict("environment", "runtime",
                              f"the target runtime cannot import `{name}` (`{absent.group(0)}`), a package none of "
                              f"the run's artifacts is, with no frame of the run's own code: install {name.split('.')[0]} "
                              f"in the runtime (or repair its broken install)")
    lacking = _installed_lacks(text)
    if lacking:
        return ContextVerdict("environment", "runtime",
                              f"code outside the run's artifacts (the target's own, {lacking[2]}) fails to import "
                              f"`{lacking[0]}` from the installed `{lacking[1]}`, with no frame of the run's own code: "
                              f"that release of {lacking[1]} lacks a name the target needs; install the release the "
                              f"target requires in the runtime")
    broken = _RUNTIME_BROKEN.search(text)
    if broken:
        return ContextVerdict("environment", "runtime",
                              f"an installed package of the target runtime cannot work there (`{broken.group(0)}`), "
                              f"with no frame of the run's own code: install matching releases in the runtime")
    ended = _SIGTERM.search(text)
    if ended and not _OWN_STOP.search(text):
        return ContextVerdict("environment", "host",
                              f"a process was ended by SIGTERM (`{ended.group(0)}`) that the gate's own launcher did "
                              f"not send (it stops a launch only at its time limits, and says so), with no frame of "
                              f"the run's own code: the host or its scheduler ended the job (preemption, a node "
                              f"drained); run it again where it is not preempted, no migration artifact changes")
    host = _HOST.search(text)
    if host:
        limit = (" — the kernel ends a process that passes a resource limit of the shell or node that started it "
                 "(CPU time: `ulimit -t`, a login node's profile; file size: `ulimit -f`): raise the limit or start "
                 "the job where it has none (a compute node through the scheduler)") if _LIMIT.search(host.group(0)) \
            else ""
        return ContextVerdict("environment", "host",
                              f"an operating-system error of the host (`{host.group(0)}`) with no frame of the run's "
                              f"own code{limit}: fix the host (disk, mount, network interface, memory, process "
                              f"limits), not the migration" + variables_valued(text, artifacts))
    if changed_last:
        return ContextVerdict(changed_last, "last-change",
                              f"nothing in the failure decides; the last change of this run before the failing gate "
                              f"was the {changed_last} phase's")
    return None


# ``from pkg import name`` failing on an installed package: Python names the package's file in parentheses
_NAME_NOT_IN_PACKAGE = re.compile(r"cannot import name '(?P<name>[\w.]+)' from '(?P<mod>[\w.]+)' \((?P<path>[^)\n]+)\)")


def _installed_lacks(text: str) -> tuple[str, str, str] | None:
    """(name, package, the importing file:line) when an import of a name from an installed package (its file under
    site-packages) fails in code that is not itself that installed package: the traceback's innermost frame outside
    site-packages did the import. None without such an import error or such a frame."""
    found = _NAME_NOT_IN_PACKAGE.search(text)
    if not found or not _SITE.search(found.group("path").replace("\\", "/")):
        return None
    outside = [(p, n) for p, n in frames(text[:found.start()] + text[found.end():])
               if not _SITE.search(p.replace("\\", "/")) and not p.startswith("<")]
    if not outside:
        return None
    path, line = outside[-1]
    return found.group("name"), found.group("mod").split(".")[0], f"{path}:{line}"


def runtime_env_owner(text: str, artifacts: Artifacts, script_sets: Iterable[str] = ()) -> ContextVerdict | None:
    """The failure's error lines quote a value that a variable of the target runtime's environment holds, a variable
    the target's own code reads (``os.getenv(NAME, default)``) and that the environment sets to another value than
    that default (G0's env probe): the code took the value from the process environment, which no file of the run
    sets, so the environment is the fix (unset or correct the variable), whatever the message's usual owner. Not
    when the run's launch script sets the variable (``script_sets``: the run's setting then) or the run's YAML holds
    the same value (either could have supplied it). None when no such value is quoted."""
    said = "\n".join(_error_lines(text))
    in_yaml = set(artifacts.yaml_values.values())
    for name, (value, default) in sorted(artifacts.runtime_env.items()):
        if name in set(script_sets) or len(value) < 3 or value == default or value in in_yaml:
            continue
        if re.search(rf"(?<![\w.-]){re.escape(value)}(?![\w-])", said):
            was = f" (the code's default: `{default}`)" if default is not None else ""
            return ContextVerdict("environment", "runtime-env",
                                  f"`{value}`, which the error quotes, is the value of {name} in the target "
                                  f"runtime's environment; the target's own code reads {name}{was} and no file of "
                                  f"this run sets it: unset {name} in the runtime's environment (its activation "
                                  f"script or shell profile), no migration artifact changes")
    return None


# a traceback whose exception is a warning class: ``warnings.warn`` raised it, so the warnings filter was "error"
_WARNING_RAISED = re.compile(r"^\s*(?:\[rank\d+\]:\s*)?(?:[A-Za-z_][\w.]*\.)?(?P<cls>[A-Za-z]*Warning): ", re.M)
# the filter set to error on a command line (python -W error, -Werror) or in the variable
_WARNINGS_ERROR = re.compile(r"(?:^|,)\s*error\b")
_W_FLAG = re.compile(r"(?:^|\s)-W\s*['\"]?error\b")


def warning_raised_owner(text: str, artifacts: Artifacts, script: str = "") -> ContextVerdict | None:
    """A warning was raised as an exception (a traceback through ``warnings.warn`` that ends in a ``…Warning:``
    line): a library's warning is no failure unless the process's warnings filter turns it into one. That filter
    comes from the runtime's environment (PYTHONWARNINGS, which G0's env probe read in a rank's view: environment)
    or from the run's launch script (``python -W error``: config); None when neither says error (the code itself
    set the filter, or it is not known)."""
    found = _WARNING_RAISED.search(text)
    if not found or ("warnings.warn" not in text and "Traceback (most recent call last)" not in text):
        return None
    said = artifacts.interpreter_env.get("PYTHONWARNINGS", "")
    return _switch_verdict(artifacts, f"a {found.group('cls')} was raised as an exception",
                           "PYTHONWARNINGS" if _WARNINGS_ERROR.search(said) else None, said,
                           bool(_W_FLAG.search(script)), "-W error",
                           "turns every library's warning into an error", "(or drop its error filter)")


def _switch_verdict(artifacts: Artifacts, what: str, variable: str | None, value: str, flagged: bool, flag: str,
                    effect: str, unset: str) -> ContextVerdict | None:
    """An interpreter switch that explains the error: set by the runtime's environment (``variable`` with its
    ``value``, as G0's env probe read it: environment) or by the run's launch script (``flag``: config)."""
    if variable is not None:
        return ContextVerdict("environment", "runtime-env",
                              f"{what}: the runtime's environment sets {variable}={value}, which {effect}; unset "
                              f"{variable} {unset} in the runtime's environment, no migration artifact changes")
    if flagged:
        config = _names(artifacts.config[1:2]) or "the launch script"
        return ContextVerdict("config", "key", f"{what}: {config} starts Python with {flag}, which {effect}; drop "
                                               f"that flag")
    return None


# an error about a missing docstring (transformers builds classes and their docs from ``__doc__``), and the
# interpreter's switch that strips every docstring: PYTHONOPTIMIZE at 2 or more, ``python -OO`` on a command line
_DOCSTRING_SAID = re.compile(r"\bdocstring\b|__doc__")
_OO_FLAG = re.compile(r"(?:^|\s)-OO\b|(?:^|\s)-O\s*-O\b")


def interpreter_switch_owner(text: str, artifacts: Artifacts, script: str = "") -> ContextVerdict | None:
    """An error about a docstring (one missing, or read as None) while the interpreter strips docstrings: code that
    reads ``__doc__`` finds nothing whoever wrote it. The switch comes from the runtime's environment
    (PYTHONOPTIMIZE >= 2, which G0's env probe read in a rank's view: environment) or from the run's launch script
    (``python -OO``: config); None when neither strips them."""
    if not _DOCSTRING_SAID.search("\n".join(_error_lines(text))):
        return None
    said = artifacts.interpreter_env.get("PYTHONOPTIMIZE", "").strip()
    return _switch_verdict(artifacts, "the error is about a docstring",
                           "PYTHONOPTIMIZE" if said.isdigit() and int(said) >= 2 else None, said,
                           bool(_OO_FLAG.search(script)), "-OO",
                           "strips every docstring (and assert) from the code the interpreter loads, the installed "
                           "libraries' included", "(or set it below 2)")


# torch.distributed building a backend's process group (its own frames or error): the backend reads its variables
_PG_BACKEND = re.compile(r"ProcessGroup(?P<a>Gloo|NCCL|Nccl|HCCL|Hccl)\b|(?P<b>gloo|nccl|hccl) (?:device|transport)\b")


def backend_env_owner(text: str, artifacts: Artifacts, script_sets: Iterable[str] = ()) -> ContextVerdict | None:
    """A collective backend failed to build its process group (``ProcessGroupGloo(...)`` in the traceback, or its
    error naming the backend's device / transport) while the runtime's environment (G0's env probe, a rank's view)
    sets that backend's own variables (``GLOO_*`` for gloo) that the run's launch script does not set: the backend
    read them when it started, so they are the fix (environment). None when no such variable is set."""
    found = _PG_BACKEND.search(text)
    if not found:
        return None
    prefix = (found.group("a") or found.group("b")).upper() + "_"
    named = {k: v for k, v in sorted(artifacts.environment.items()) if k.startswith(prefix) and k not in
             set(script_sets)}
    if not named:
        return None
    said = ", ".join(f"{k}={v}" for k, v in list(named.items())[:3])
    return ContextVerdict("environment", "runtime-env",
                          f"the {prefix[:-1].lower()} backend failed to build its process group while the target "
                          f"runtime's environment sets {said}, which that backend reads when it starts and no file of "
                          f"this run sets: unset or correct {', '.join(list(named)[:3])} in the runtime's environment")


def runtime_decode_owner(text: str, source_error: str, undecodable: list[str] | None,
                         checked: int) -> ContextVerdict | None:
    """The same error the failure shows was raised in this runtime by the source's own processor on the same
    records (``source_error``: G1's forward probe building its batch, which runs none of the run's data path), and
    every media file of the records that msmigrate's own interpreter decoded (``checked`` of them, ``undecodable``
    naming those that did not) decodes there: neither the run's data path nor the files cause it, the runtime's own
    media library does (a Pillow without a codec, a broken install): environment. None when the error differs from
    the source's, when a file does not decode outside the runtime either (the file is the fault: data), or when
    nothing was decoded."""
    message = source_error.split(": ", 1)[-1].strip()
    if len(message) < 8 or message not in text or undecodable is None or undecodable or not checked:
        return None
    return ContextVerdict("environment", "runtime-decode",
                          f"the source's own processor, which runs none of this run's data path, failed in this "
                          f"runtime on the same records with the same error (`{source_error[:160]}`, G1), and the "
                          f"records' {checked} media file(s) decode with Pillow outside the runtime: the runtime's "
                          f"media library cannot decode them; reinstall Pillow (with its codecs: zlib, libjpeg) in "
                          f"the target runtime, no migration artifact changes")


def host_memory_shortage(text: str, host_memory: int | None) -> str:
    """Why a CPU allocator refusal is the host's memory, '' when it is not one: the size asked for fits the host's
    physical memory, so the memory is held elsewhere (another job, other processes); a size beyond the host is no
    shortage but a wrong size, owned by whose code computed it (owners.py). No known host size: undecided."""
    found = _CPU_ALLOC.search(text)
    if not found or not host_memory:
        return ""
    asked = int(found.group("bytes"))
    if asked > host_memory:
        return ""
    return (f"the host's CPU allocator refused {asked / 2**20:.0f} MiB on a host with {host_memory / 2**30:.1f} GiB "
            f"of memory: the memory is held by other processes, not asked for by a wrong size; free the host's "
            f"memory (or run where it is free), no migration artifact changes")


def _in_run(module: str, artifacts: Artifacts) -> bool:
    """Whether a module name is one of the run's own packages (the plugin, the data path: their dotted folders)."""
    top = module.split(".")[0]
    return any(top == root.strip("/").split("/")[0] for root in (*artifacts.model, *artifacts.data))


def variables_valued(text: str, artifacts: Artifacts) -> str:
    """A sentence naming the runtime's environment variables whose value the failure's error lines name (an
    interface, a host name, a port a variable set), '' when none: the fix is that variable, not the host alone."""
    said = "\n".join(_error_lines(text)) or text
    named = [(k, v) for k, v in sorted(artifacts.environment.items()) if isinstance(v, str) and len(v) >= 3 and
             re.search(rf"(?<![\w.-]){re.escape(v)}(?![\w-])", said)]
    if not named:
        return ""
    return "; " + "; ".join(f"`{v}` is the value of {k} in the target runtime's environment: unset {k} or set it "
                            f"to what this host has" for k, v in named[:3])


def loss_graph_owner(artifacts: Artifacts) -> ContextVerdict:
    """The loss reached backward without a graph: the YAML froze the parameters (config), or, when it freezes
    nothing, the model's forward returned a loss its parameters do not compute (model)."""
    config = _names(artifacts.config[:1]) or "the YAML"
    if artifacts.frozen:
        return ContextVerdict("config", "loss-graph",
                              f"backward got a loss with no autograd graph and {config} freezes "
                              f"{', '.join(artifacts.frozen[:4])} (model.freeze): unfreeze what must train")
    plugin = _names(artifacts.model[:1]) or "the model plugin"
    return ContextVerdict("model", "loss-graph",
                          f"backward got a loss with no autograd graph while {config} freezes nothing "
                          f"(model.freeze is empty): the model's forward returned a loss cut from its parameters "
                          f"(detached, replaced, or computed without them); fix the forward in {plugin}")


def _names(paths: Iterable[str]) -> str:
    return ", ".join(paths)


def _what(owner: str) -> str:
    return {"model": "the model plugin", "data": "the data path", "config": "the training settings"}[owner]


def scalar_leaves(data: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted path -> scalar value (str, int, float, bool or None) of a loaded YAML mapping (lists are left out)."""
    out: dict[str, Any] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            dotted = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, dict):
                out.update(scalar_leaves(value, dotted))
            elif value is None or isinstance(value, (str, int, float, bool)):
                out[dotted] = value
    return out


def yaml_values(data: Any, prefix: str = "") -> dict[str, str]:
    """Dotted path -> scalar value as text, for a loaded YAML mapping (lists, booleans and nulls are left out)."""
    return {k: str(v) for k, v in scalar_leaves(data, prefix).items()
            if isinstance(v, (str, int, float)) and not isinstance(v, bool)}


def yaml_keys(data: Any, prefix: str = "") -> dict[str, str]:
    """Leaf key -> dotted path for a loaded YAML mapping (the first path wins for a leaf name used twice)."""
    out: dict[str, str] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            dotted = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, dict):
                for leaf, path in yaml_keys(value, dotted).items():
                    out.setdefault(leaf, path)
            else:
                out.setdefault(str(key), dotted)
    return out


IMPORT_FAILED = re.compile(r"cannot import name '(?P<name>[\w.]+)' from '(?P<mod>[\w.]+)'|"
                            r"No module named '(?P<missing>[\w.]+)'|"
                            r"Could not import module '(?P<lazy>[\w.]+)'")  # transformers' lazy import, cause hidden
# the probes' "raised in <file>:<line>" note where that file is an installed package's (its top-level name)
_RAISED_IN_PACKAGE = re.compile(r"raised in [^\s;]*[/\\](?:site|dist)-packages[/\\](?P<package>\w+)[/\\]")
# the probes' note of the exception an error was raised from (``error_with_place``: "; caused by Type: message
# (raised in …)"), and the module that message names
_CAUSED_BY = re.compile(r"; caused by (?P<cause>\w+(?:Error|Exception): .+?) \(raised in (?P<where>[^;)]+)")
_CAUSE_MODULE = re.compile(r"(?:module|No module named|from) '(?P<module>[\w.]+)'")
_ID_UNREGISTERED = re.compile(r"ID '(?P<id>[^']+)' is not registered|model_id '(?P<id2>[^']+)' is not registered")


_UNPARSABLE = re.compile(r"\b(?:SyntaxError|IndentationError|TabError)\b")


# transformers' "Can't load <part> for '<folder>'" (its loading of a processor part from a folder)
_CANT_LOAD = re.compile(r"Can't load (?P<part>image processor|processor|video processor|feature extractor|tokenizer)"
                        r" for '(?P<path>[^']+)'")
PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json")


def input_folder_owner(text: str, source: Path | str | None) -> ContextVerdict | None:
    """A processor part that cannot be loaded from the run's own source folder — the user's input, not an artifact
    of the run — because that folder holds none of the files it is read from (``PROCESSOR_FILES``, read on disk):
    the checkpoint folder is incomplete. None for another folder (a path the YAML names is the config's) or where
    the files are there (then the cause is elsewhere)."""
    found = _CANT_LOAD.search(text)
    if found is None or source is None or not Path(source).is_dir():
        return None
    folder = Path(found.group("path"))
    if not folder.is_dir() or folder.resolve() != Path(source).resolve():
        return None
    if any((folder / name).is_file() for name in PROCESSOR_FILES):
        return None
    return ContextVerdict("environment", "input-folder",
                          f"the {found.group('part')} is loaded from the source's own folder {folder}, which holds "
                          f"none of {', '.join(PROCESSOR_FILES)}: the checkpoint folder given as the source is "
                          f"incomplete (copied without its processor files); copy preprocessor_config.json from the "
                          f"model's release into it — no artifact of the migration changes")


def broken_install_owner(text: str) -> ContextVerdict | None:
    """A file of an installed package that does not parse (a SyntaxError raised in site-packages): the package's
    install is broken (cut by a full disk, an interrupted upgrade); no artifact of the run fixes that."""
    raiser = _RAISED_IN_PACKAGE.search(text)
    if raiser is None or not _UNPARSABLE.search(text):
        return None
    return ContextVerdict("environment", "broken-install",
                          f"a file of the installed `{raiser.group('package')}` does not parse (a SyntaxError raised "
                          f"in its own module under site-packages): its install is broken; reinstall "
                          f"{raiser.group('package')} (pip install --force-reinstall)")


def plugin_import_owner(text: str, artifacts: Artifacts, architecture: str | None,
                        model_type: str | None, target_imports: Iterable[str] = ()) -> ContextVerdict | None:
    """An import the run's own plugin makes fails. Environment when what is missing is the source's own
    architecture (its class, or the library module of its model type): installing the release that has it is the
    fix. Model otherwise: the plugin imports a name the installed library does not have, so the plugin must change
    (owners.py: code written for another release: the plugin the migration writes is model)."""
    found = IMPORT_FAILED.search(text)
    own = run_frames(text, artifacts)
    if not found or not own or own[-1][2] != "model":
        return None
    path, line, _ = own[-1]
    missing = found.group("name") or found.group("missing") or found.group("lazy") or ""
    module = found.group("mod") or found.group("missing") or ""
    parts = set(module.split("."))
    if (architecture and missing == architecture) or (model_type and model_type in parts):
        cause = _CAUSED_BY.search(text)
        if cause:  # the library has the class; importing it failed on something it imports in turn
            named = _CAUSE_MODULE.search(cause.group("cause"))
            top = named.group("module").split(".")[0] if named else None
            dists = ", ".join(importlib.metadata.packages_distributions().get(top, [])) if top else ""
            return ContextVerdict("environment", "plugin-import",
                                  f"`{cause.group('cause')[:160]}`"
                                  + (f": the installed `{top}`{f' ({dists})' if dists else ''} is not the release "
                                     f"the library needs" if top else ": a package the library imports is missing "
                                     "or of another release")
                                  + f" — importing `{missing}` (the source's own architecture, for the plugin's "
                                    f"import at {path}:{line}) failed on it, raised in "
                                    f"{cause.group('where')[:160]}; install the release it requires")
        return ContextVerdict("environment", "plugin-import",
                              f"the plugin's import at {path}:{line} needs `{missing}`, the source's own "
                              f"architecture, which the installed library lacks: install a release that has it "
                              f"(transformers)")
    if module and module in set(target_imports):
        return ContextVerdict("environment", "plugin-import",
                              f"`{module}`, which the plugin's import at {path}:{line} asks for, is imported by the "
                              f"target's own code too: the installed release lacks a module the target itself needs, "
                              f"which no change of the plugin fixes; install the release the target requires")
    raiser = _RAISED_IN_PACKAGE.search(text)
    if raiser and module.split(".")[0] == raiser.group("package"):
        return ContextVerdict("environment", "plugin-import",
                              f"the installed `{raiser.group('package')}` fails to import `{missing}` from its own "
                              f"`{module}` (raised in {raiser.group('package')}'s own module, reached from "
                              f"{path}:{line}): that release lacks what its own code needs, which no change of the "
                              f"plugin fixes; install a {raiser.group('package')} release that has `{module}."
                              f"{missing}`")
    return ContextVerdict("model", "plugin-import",
                          f"the plugin's import at {path}:{line} asks for `{missing}` from `{module}`, which the "
                          f"installed library does not have and the source's architecture does not need: change "
                          f"that import in {path}")


_REMEDY = re.compile(r"\b(?:raise|lower|set|change|remove) `?(?P<key>[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)+)`?")


# a gate's own check that traced the cause to the code object doing it: "the collator X (defined in path.py)"
DEFINED_IN = re.compile(r"\(defined in (?P<path>[\w./-]+\.py)\)")


def gate_remedy_owner(gate_lines: str, artifacts: Artifacts) -> ContextVerdict | None:
    """The failed gate's own check measured the cause and says which setting to change (``raise
    data.dataset_param.basic_parameters.cutoff_len to at least 95``): a whole dotted key of this run's YAML in the
    gate's problem lines (not in the run's output) is the fix, so config, whichever case the output's error matches
    (a cut sample then fails in the model as too few media tokens). Also a file of this run the check traced the
    cause to (``defined in <path>``: the collator or mm_plugin doing it): that file's owner. The setting comes
    first: the code object is where the effect showed, while a setting the check measured (or re-ran the check with
    and saw pass: G2's data settings set as derived) is what makes that code do it — a collator that pads the labels
    with the pad id because the YAML's ``ignore_pad_token_for_loss`` tells it to is fixed in the YAML."""
    keys = set(artifacts.yaml_keys.values())
    for m in _REMEDY.finditer(gate_lines):
        # a key of the YAML, or one to set in a section it has (a setting written at another level: not set there)
        parent = m.group("key").rsplit(".", 1)[0]
        if m.group("key") in keys or any(k.startswith(parent + ".") for k in keys):
            config = _names(artifacts.config[:1]) or "the YAML"
            return ContextVerdict("config", "gate-remedy",
                                  f"the gate's own check names the setting to change: {m.group(0)} in {config}")
    for m in DEFINED_IN.finditer(gate_lines):
        owner = artifacts.owner_of(m.group("path"))
        if owner is not None:
            return ContextVerdict(owner, "gate-remedy",
                                  f"the gate's own check traced the cause to {m.group('path')}, {_what(owner)} of "
                                  f"this run: the fix changes that file")
    return None


def finding_remedy_owner(findings: Iterable[dict[str, Any]] | None) -> ContextVerdict | None:
    """The failed gate's own check recorded, as data, a config key and the value it needs (G2's cutoff check: the
    ``minimum`` cutoff_len that cuts no sample's media): config, before any YAML is delivered too (G2 checks a draft
    of it before the config phase has written one, so the key is not among the run's YAML keys yet)."""
    for f in findings or []:
        if f.get("severity") == "error" and f.get("path") and f.get("minimum") is not None:
            return ContextVerdict("config", "gate-remedy",
                                  f"the gate's own check measured what {f['path']} needs: at least {f['minimum']} "
                                  f"(it is {f.get('value')})")
    return None


@dataclass(frozen=True)
class RegistryFact:
    """One registry lookup the YAML asks for: its key, the YAML's value, the value the run's plan chose, the ids the
    target registers, which owner's artifact registers such ids (model: the plugin; data: templates, collators,
    datasets) and where."""
    key: str
    value: str
    planned: str | None
    registered: tuple[str, ...]
    registrar: str
    where: str = ""


_LOOKUP_FAILED = re.compile(r"not registered|does not exist|not found|[Uu]nknown|No \w+(?: \w+)? is registered|"
                            r"[Aa]vailable|not supported|KeyError")


def registration_owner(text: str, facts: Iterable[RegistryFact]) -> ContextVerdict | None:
    """A lookup of a name the YAML sets failed. When the YAML names what the plan chose and the target registers
    no such id, the artifact that should register it must change (the plugin: model; the data path: data). When
    the YAML names another value than the plan's and the plan's is registered, the YAML must change: config.
    Otherwise (no plan, or both sides unregistered) undecided."""
    if not _LOOKUP_FAILED.search(text):
        return None
    for fact in facts:
        if not fact.value or not re.search(rf"(?<![\w.-]){re.escape(fact.value)}(?![\w-])", text):
            continue
        if fact.value in fact.registered or not fact.planned:
            continue
        where = f" in {fact.where}" if fact.where else ""
        if fact.value == fact.planned:
            listed = ", ".join(fact.registered[:8]) or "none"
            return ContextVerdict(fact.registrar, "registration",
                                  f"the YAML's {fact.key} '{fact.value}' is what this migration chose, and nothing "
                                  f"registers it (registered: {listed}): fix the registration{where}")
        if fact.planned in fact.registered:
            return ContextVerdict("config", "registration",
                                  f"the YAML sets {fact.key} '{fact.value}', which nothing registers, while this "
                                  f"migration chose '{fact.planned}', which is registered: set {fact.key} to "
                                  f"'{fact.planned}' in the YAML")
    return None


# transformers refusing an attention implementation names the class it was asked on (``self.__class__.__name__``)
_ATTN_REFUSED = re.compile(r"\b(?P<cls>[A-Za-z_]\w*) does not support (?:an attention implementation\b|Flash "
                           r"Attention\b|\w+ attention\b)")


def attention_class_owner(text: str, own_classes: Iterable[str]) -> ContextVerdict | None:
    """An attention implementation was refused by a class that is none of the run's model classes (the classes the
    plugin's model builds, the plugin's and the source's own definitions): code outside the model built that class —
    the framework's HF weight loader picking a class of the plugin's chain when the plugin class gives it no
    ``_checkpoint_conversion_mapping`` is the known one —, so setting ``attn_implementation`` on the model does not
    reach it and may cost the model its real attention path: the plugin class must give the loader what it reads.
    None when the refusing class is the model's own (the attention case's advice stands) or nothing is known of the
    model's classes."""
    own = {c for c in own_classes if c}
    found = _ATTN_REFUSED.search(text)
    if not found or not own or found.group("cls") in own:
        return None
    # the traceback that ends in the refusal (a launcher's own traceback may follow it), up to its error line; the
    # probes' one-line "raised in …; called from …" note follows the message instead
    line_end = text.find("\n", found.end())
    upto = text[:line_end if line_end >= 0 else len(text)]
    outside = [(p, n) for p, n in frames(upto) if not _SITE.search(p.replace("\\", "/"))]
    where = f" (the innermost frame outside the installed libraries: {outside[-1][0]}:{outside[-1][1]})" \
        if outside else ""
    return ContextVerdict(
        "model", "attention-class",
        f"`{found.group('cls')}`, the class that refused the attention implementation, is none of this run's model "
        f"classes ({', '.join(sorted(own)[:6])}{', …' if len(own) > 6 else ''}): code outside the model built it"
        f"{where}, so `model.attn_implementation: eager` would not reach it (and would take the model's own sdpa "
        f"path away). The framework's HF weight loader maps the checkpoint's keys with the model class's "
        f"`_checkpoint_conversion_mapping` (regex pattern -> replacement, first match wins); a plugin class without "
        f"one leaves the key mapping to the loader's fallback, which may build a library class of the plugin's "
        f"chain (for vendored remote code the bare `PreTrainedModel`). Fix the plugin class: give it the "
        f"`_checkpoint_conversion_mapping` its checkpoint needs (its keys' prefixes to the plugin's parameter "
        f"names; where they are already equal, a mapping of each top-level prefix to itself), or derive it from "
        f"the library's concrete class of its architecture")


def source_batch_owner(text: str, artifacts: Artifacts) -> ContextVerdict | None:
    """G1 runs the plugin on a batch the source's own processor made from the records: the run's data path (its
    template, mm_plugin, collator) and its YAML feed nothing there. A data verdict at G1 therefore stands only where
    the failure names a records or media file; otherwise what G1 found is the plugin's (model)."""
    if any(owner == "data" and line == 0 for _, line, owner in run_frames(text, artifacts)):
        return None
    return ContextVerdict("model", "source-batch",
                          "G1's batch is the source processor's own (the run's data path made none of it) and the "
                          "failure names no record or media file: the fix changes "
                          f"{_names(artifacts.model) or 'the model plugin'}")


_NO_FILE = re.compile(r"No such file or directory: '(?P<path>[^'\n]+)'")
_PATH_VALUE = re.compile(r"^(?:\.{1,2}/|/|~)|/")


def media_path_owner(text: str, artifacts: Artifacts, target: Path, records_dir: Path | None) -> ContextVerdict | None:
    """A relative file an error could not open exists under the training records' folder: the file is not missing
    (data); the setting that resolves it against a folder points elsewhere (config). Names the YAML's path-valued
    data settings under which it is not found (a folder setting first). None when the file is absent there too,
    when no such setting is in the YAML, or when one of them does resolve it (then the code that opened the file did
    not use it: the data path's)."""
    found = _NO_FILE.search(text)
    if not found or records_dir is None:
        return None
    named = Path(found.group("path"))
    if named.is_absolute() or not (records_dir / named).is_file():
        return None
    folders = [(dotted, value) for dotted, value in artifacts.yaml_values.items()
               if dotted.startswith("data.") and _PATH_VALUE.search(value) and not (target / value).is_file()]
    if any((target / value / named).is_file() for _, value in folders):
        return None  # a setting of the YAML does resolve it: the code that opened it did not use that setting
    wrong = [dotted for dotted, _ in folders]
    wrong.sort(key=lambda dotted: "dir" not in dotted.rsplit(".", 1)[-1])
    if not wrong:
        return None
    config = _names(artifacts.config[:1]) or "the YAML"
    return ContextVerdict("config", "key",
                          f"set {wrong[0]} ({artifacts.yaml_values[wrong[0]]} in {config}) to {records_dir}: "
                          f"`{named}` exists in that training records' folder, so the file is not missing; the "
                          f"setting that resolves it points elsewhere")


def yaml_file_owner(text: str, artifacts: Artifacts, target: Path, inputs: Iterable[Path | str] = ()) -> \
        ContextVerdict | None:
    """A file an error could not open that is, word for word, the value of a key of the run's YAML and exists neither
    from the checkout's root (where the launch runs) nor as an absolute path: the YAML names a file that is not
    there, whatever code opened it (a template's loader, a processor), so the fix is that key (config). Paths under
    the run's inputs (``inputs``: the source folder, the records' folder) are left to the rules of the inputs: there
    the YAML points where the user said, and the file is what is missing."""
    found = _NO_FILE.search(text)
    if not found:
        return None
    named = found.group("path")
    keys = [dotted for dotted, value in artifacts.yaml_values.items() if value == named]
    if len(keys) != 1 or (Path(target) / named).exists() or Path(named).exists():
        return None
    if any(_under(named, Path(root)) for root in inputs if root):
        return None
    config = _names(artifacts.config[:1]) or "the YAML"
    return ContextVerdict("config", "key",
                          f"{keys[0]} in {config} names {named}, which is not a file from the checkout's root (where "
                          f"the launch runs) nor anywhere else here: the setting points at a file that does not "
                          f"exist; set {keys[0]} to a file that does, or remove it")


def _under(path: str, root: Path) -> bool:
    try:
        Path(path).resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return False
    return True


def derived_settings_owner(named: Iterable[str], data_settings: dict[str, Any] | None,
                           artifacts: Artifacts) -> ContextVerdict | None:
    """A failure that names data settings of the YAML (a role tag the records contradict) while G2 found those
    settings to be what this migration derives from the records' own first sample and the plan
    (``data_settings.same``, agent/routes/fsdp2/gates/data_settings.py): the YAML already says what the data
    declares, so what contradicts it is the records or the data path (data), not the YAML. None when a named key
    is not among them, or G2 recorded no comparison."""
    keys = list(dict.fromkeys(named))
    same = set((data_settings or {}).get("same") or [])
    if not keys or not same or not all(k in same for k in keys):
        return None
    records = ", ".join(artifacts.records[:1]) or "the training records"
    return ContextVerdict("data", "derived-settings",
                          f"the YAML's {', '.join(keys[:4])} are what this migration derives from the records' own "
                          f"first sample and the plan (G2 compared them): the YAML agrees with the data's declared "
                          f"format, so the samples that contradict it must change: fix the training records "
                          f"(train.json under {records}) or the data path that maps them")


# Python's own wording for a call that does not fit a function's signature, naming the class and the method
_SIGNATURE = re.compile(r"\b(?P<cls>[A-Za-z_]\w*)\.(?P<fn>[A-Za-z_]\w*)\(\) (?:missing \d+ required (?:positional|"
                        r"keyword-only) arguments?|got an unexpected keyword argument|takes \d+ positional arguments? "
                        r"but \d+ (?:was|were) given|got multiple values for argument)")


def signature_owner(text: str, plugin_classes: dict[str, str]) -> ContextVerdict | None:
    """A call that does not fit a method of a class the run's plugin defines (``plugin_classes``: class -> file):
    the framework and the probes call the model the one way the trainer does, so the plugin's signature must change
    (owners.py: the forward signature and the model's construction are the model's). None for any other class."""
    found = _SIGNATURE.search(text)
    if not found or found.group("cls") not in plugin_classes:
        return None
    where = plugin_classes[found.group("cls")]
    return ContextVerdict("model", "signature",
                          f"`{found.group('cls')}.{found.group('fn')}()`, defined in the run's plugin ({where}), does "
                          f"not take the call the framework makes (`{found.group(0)}`): change that signature in "
                          f"{where}")


def fix_in_place_owner(autofix: Iterable[dict[str, Any]] | None, text: str,
                       artifacts: Artifacts) -> ContextVerdict | None:
    """A config case matched, but the run's YAML already holds the setting that case's own fix writes (its autofix
    ``set_yaml`` path and value: ``model.attn_implementation: sdpa`` for flash attention asked where flash-attn is
    absent): that setting did not ask for what failed, so the YAML is not what to change. The innermost frame of the
    run's own code that is not its settings (the plugin, the data path) is where the request came from: its owner.
    None when the YAML holds another value, or no such frame is in the failure (the case's owner stands)."""
    for action in autofix or []:
        path, value = action.get("path"), action.get("value")
        if action.get("action") != "set_yaml" or not path or value is None or \
                artifacts.yaml_values.get(path) != str(value):
            continue
        own = [f for f in run_frames(text, artifacts) if f[2] != "config" and f[1] > 0]
        if not own:
            return None
        where, line, owner = own[-1]
        return ContextVerdict(owner, "fix-in-place",
                              f"the run's YAML already sets {path}: {value}, the fix this message usually needs, so "
                              f"the setting did not ask for what failed; the request comes from {where}:{line} "
                              f"({_what(owner)}), reached before the error: the fix changes that file")
    return None


# G3's attention check ("X, Y declare no sdpa support") and transformers' refusal ("X does not support ...")
_DECLARE_NO = re.compile(r"(?P<classes>[A-Za-z_]\w*(?:, [A-Za-z_]\w*)*) declare no (?P<impl>\w+) support")
_ATTN_FLAGS = {"sdpa": ("_supports_sdpa",), "flash_attention_2": ("_supports_flash_attn", "_supports_flash_attn_2"),
               "flash_attention_3": ("_supports_flash_attn_3",)}


def _refused_attention(text: str) -> list[tuple[str, str]]:
    """(class, implementation) pairs the failure says a class does not declare."""
    pairs = [(cls, m.group("impl")) for m in _DECLARE_NO.finditer(text) for cls in m.group("classes").split(", ")]
    for m in _ATTN_REFUSED.finditer(text):
        line = text[m.start(): (text.find("\n", m.end()) + 1 or len(text) + 1) - 1]
        impl = "flash_attention_2" if "Flash Attention" in line or "flash_attention_2" in line else \
            "sdpa" if "scaled_dot_product_attention" in line or "sdpa" in line else None
        if impl:
            pairs.append((m.group("cls"), impl))
    return pairs


def attention_flag_owner(text: str, plugin_files: dict[str, Path]) -> ContextVerdict | None:
    """An attention implementation is refused (G3's check, or transformers at build time) for a class whose refusal
    comes from the plugin's own code: the plugin's class body assigns the declaring flag (``_supports_sdpa = False``)
    itself. transformers reads the flag off the class, so the plugin's assignment is what refuses it, whatever the
    source declares: the plugin is the fix (model). None when no refused class sets the flag in the plugin (it is
    inherited from the source's or the library's class: the configuration must ask for another implementation).
    ``plugin_files``: class name -> its file, for the classes the run's plugin defines."""
    for cls, impl in _refused_attention(text):
        flags = _ATTN_FLAGS.get(impl, ())
        path = plugin_files.get(cls)
        if not flags or path is None:
            continue
        try:
            tree = ast.parse(Path(path).read_text(encoding="utf-8", errors="replace"))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef) or node.name != cls:
                continue
            for stmt in node.body:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else \
                    [stmt.target] if isinstance(stmt, ast.AnnAssign) and stmt.value is not None else []
                value = getattr(stmt, "value", None)
                if any(isinstance(t, ast.Name) and t.id in flags for t in targets) and \
                        isinstance(value, ast.Constant) and not value.value:
                    return ContextVerdict(
                        "model", "attention-flag",
                        f"`{cls}` is refused {impl} because the plugin's own class sets "
                        f"`{targets[0].id} = {value.value!r}` ({path}:{stmt.lineno}): transformers reads that flag "
                        f"off the class, so the YAML's choice is not what fails; drop that assignment (or set it "
                        f"True where the attention code supports {impl}) in the plugin")
    return None
