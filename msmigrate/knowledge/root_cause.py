"""Root-cause extraction: the lines of a log that say *why* a run failed, before any matching happens.

A training log is mostly noise for diagnosis: INFO lines, HCCL/NCCL INFO chatter, deprecation and user warnings,
progress bars, torchrun's ``ChildFailedError`` summary. Matching the whole text lets that noise decide the class
(an ``HCCL ... timeout`` setting echoed at INFO level read as an HCCL timeout). This module reads the log line by
line and keeps only failure signals:

- ``exception``: the exception line(s) that end a Python traceback (with ``[rankN]:`` and similar prefixes removed),
  and exception lines printed without a traceback; chained tracebacks keep every link; wrapper exceptions
  (``ChildFailedError``, ``ProcessRaisedException``, ...) are kept but never chosen as the root cause;
- ``traceback``: a traceback whose exception line is missing (the output was cut), represented by its last frame;
- ``ascend``: CANN / Ascend error codes (``EZ9999``, ``EE1002``, ``EI0006``, ``EH9999``, ``E39999``, ...),
  ``error code is 507xxx`` and ``ERRxxxxx`` lines, with their indented continuation lines;
- ``collective``: NCCL / HCCL / gloo failures (never their INFO lines; WARN lines are warnings);
- ``oom``: device or host out-of-memory messages; ``killed``: SIGKILL / exit code -9 (the OOM killer's signature);
- ``child_failed``: torchrun's root-cause section (rank, exit code) — a wrapper: it says a rank died, not why;
- ``nonfinite``: a logged loss or grad norm that is NaN/Inf;
- ``error_line``: a line logged at ERROR / CRITICAL / FATAL level, a failed assertion (a CUDA kernel's too), a
  segmentation fault or core dump;
- ``gate``: the failed gate's own verdict lines, when the caller passes them (:func:`with_gate_verdict`);
- ``known_message``: a plain line (no level, no class) that states a known failure message, added by the classifier
  when the log shows no other failure signal (:func:`with_signals`).

Warnings (``UserWarning``, ``FutureWarning``, ``[W ...]``, ``WARNING`` lines) are collected separately and never
make a log a failure. :func:`extract` returns a :class:`RootCause` whose ``primary`` is the decisive signal (the
first failing rank's last non-wrapper exception, else the strongest other signal) and whose ``evidence`` is the
text matching runs on, and ``code_path`` says whose code the decisive traceback passes through (:func:`code_path`);
``command`` is the launch command the log shows before that signal (:func:`launch_command`) and ``cut_later`` the last
frame of a later traceback cut before its exception line (another process's, whose error the excerpt lacks).
"""

from __future__ import annotations

import importlib.metadata
import re
from dataclasses import dataclass, field
from functools import lru_cache

# Prefixes launchers and loggers put in front of a process's own output; stripped before reading the line.
_PREFIXES = [
    re.compile(r"^\s*\d{1,3}:\s(?=\S)"),  # pdsh / srun node index "15: "
    re.compile(r"^\[(?:rank|default)(\d+)\]:\s?"),  # torchrun --tee / elastic
    re.compile(r"^\[\d+,(\d+)\]<std(?:out|err)>:"),  # mpirun / horovod
    re.compile(r"^(?:worker|node)[-\w]*:\s"),  # deepspeed / pdsh host tags
    re.compile(r"^\((?:\w+\s)?pid=\d+(?:,\s*ip=[\d.]+)?\)\s"),  # ray actors
    re.compile(r"^(?:\[[\w-]+\]\s)?(?:ERROR|INFO|WARNING|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d(?:\s\[[\w.]+:\d+\]|"
               r"\s[\w.]+:\d+\])\s?"),  # vLLM-style "ERROR 04-14 19:53:35 worker_base.py:581] "
    re.compile(r"^> "),  # quoted in an issue
]
_RANK_IN_PREFIX = re.compile(r"^\[(?:rank|default)(\d+)\]:|^\[\d+,(\d+)\]<std|RankID:(\d+)")
_EXC = re.compile(r"(?<![A-Za-z0-9_.])((?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*)?(?:Error|Exception|Interrupt|Failure|"
                  r"StopIteration|Exit))(?::\s?(.*)|\s*$|\s+(in line \d+\b.*))")
_WARNING_CLASS = re.compile(r"\b\w*Warning\b:")
# Python's own TypeError messages for a bad call have fixed shapes; a log that pasted one without its "TypeError:"
# prefix (a title line, an issue's summary) still shows an error: "f() got an unexpected keyword argument 'x'",
# "f() missing 1 required positional argument: 'x'", "f() takes 2 positional arguments but 3 were given"
_BARE_CALL_ERROR = re.compile(r"^[A-Za-z_][\w.]*\(\) (?:got an unexpected keyword argument '|got multiple values "
                              r"for (?:keyword )?argument '|missing \d+ required (?:positional|keyword-only) "
                              r"arguments?: |takes (?:from \d+ to )?\d+ positional arguments? but \d+ (?:were|was) given)")
# Python's AttributeError messages have fixed shapes too; pasted without their class and run onto another tool's
# prefix ("LayerUtility: PhiPrompt'DynamicCache' object has no attribute 'x'") they still say what failed
_BARE_ATTRIBUTE_ERROR = re.compile(r"(?:'[\w.]+' object|module '[\w.]+'|type object '[\w.]+') has no attribute "
                                   r"'\w+'")
# Runtime errors whose messages have fixed shapes (torch's shape checks, the dynamic loader's, the import system's):
# a paste that lost the "RuntimeError:" / "ImportError:" in front (a title line, a summary, a loader line of its own)
# still shows the error
_BARE_RUNTIME_ERROR = re.compile(
    r"The size of tensor a \(\d+\) must match the size of tensor b \(\d+\)|"
    r"mat1 and mat2 shapes cannot be multiplied|shape '\[[-\d, ]+\]' is invalid for input of size \d+|"
    r"view size is not compatible with input tensor's size and stride|"
    r"operands could not be broadcast together with shapes|"
    r"(?:^|\.so(?:\.[\d.]+)?:\s*)undefined symbol: \w+|"
    r"\.so(?:\.[\d.]+)?: cannot open shared object file|version `[^']+' not found \(required by |"
    r"^cannot import name '[\w.]+' from '[\w.]+'|^No module named '[\w.]+'")
# A shell command line (an environment assignment or a launcher in front, or a trailing backslash): the launch
# command pasted after the error, never a continuation of the error's message
_SHELL_COMMAND = re.compile(r"\s\\$|^(?:\$\s|[A-Z_][A-Z0-9_]*=\S*\s|(?:python\d?(?:\.\d+)?|torchrun|deepspeed|"
                            r"accelerate|bash|srun|mpirun|msrun|llamafactory-cli|swift)\s)")
# The source line under a traceback's last frame that raises an exception with a plain literal message (no
# formatting): when the exception line itself was cut off, this says what was raised
_RAISE_LITERAL = re.compile(r"^raise\s+((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt))\("
                            r"(['\"])([^'\"{}%\\]+)\2\)(?:\s+from\s+\w+)?$")
_HEADLESS_LIMIT = 6  # lines read after a message-less exception header for its message
_CARETS = re.compile(r"^[\^~]+$")  # the markers Python 3.11+ prints under the failing expression
# A launch command (a launcher or a Python entry, after an optional prompt and environment assignments): the
# settings the run was started with, which decide a config owner more often than the error does
_LAUNCH_COMMAND = re.compile(r"^(?:\(\S+\)\s+)?(?:\S*[$#]\s+)?(?:(?:export\s+)?[A-Z_][A-Z0-9_]*=\S*\s+)*"
                             r"(?:\S*python\d?(?:\.\d+)?\s+(?:-[A-Za-z]\s+)*(?:-m\s+[\w.]+|\S+\.py)|torchrun|deepspeed|"
                             r"accelerate\s+launch|srun|mpirun|msrun|llamafactory-cli|swift\s+(?:sft|rlhf|pt|infer)|"
                             r"bash\s+\S+\.sh|sh\s+\S+\.sh)"
                             r"(?:\s|$)")
# an exception message a reporter quoted in inline backticks inside a sentence: the quoted part is the message
_INLINE_QUOTED = re.compile(r"^`([^`]+)`\s+\S")
# a Markdown fence or a docstring quote the reporter's paste left around a line: not part of the message
_FENCE_EDGE = re.compile(r"^\s*(?:`{3}|\"{3}|'{3})\s*|\s*(?:`{3}|\"{3}|'{3})\s*$")
# The layout of warnings.formatwarning, "<file>.py:<line>: <Category>: <message>": a traceback never writes its
# exception like that (it writes `File "...", line N` frames, then the bare exception), so a line in this layout is a
# printed warning whatever its category is called (a library's own Warning subclass may be named ...Error)
_FORMATWARNING = re.compile(r"^\s*\S+\.py:\d+: [A-Z]\w*: \S")
_WRAPPERS = ("ChildFailedError", "ProcessRaisedException", "ProcessExitedException", "SystemExit",
             "KeyboardInterrupt", "CalledProcessError", "RayTaskError")
_TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):|^[─━╭]*\s*Traceback \(most recent call last\)")
_FRAME = re.compile(r'^\s*File "([^"]+)", line \d+')
_FRAME_PARTS = re.compile(r'File "([^"]+)", line (\d+)(?:, in (\S+))?')
# Where a frame's file lives says whose code it is: an installed package (site-/dist-packages, an egg), the Python
# standard library, a checkpoint's remote code (transformers' dynamic modules), or else the run's own code
_LIBRARY_PATH = re.compile(r"[/\\](?:site|dist)-packages[/\\](?:[^/\\]+\.egg[/\\])?([A-Za-z_][\w]*)")
# a path shortened by the reporter or the logger (".../torch/distributed/x.py"): whose it is can only be told from its
# first folder, which is an installed package's import name when the frame is that package's code
_ELIDED_PATH = re.compile(r"^(?:\.\.\.|…)[/\\]([A-Za-z_]\w*)[/\\]")
_REMOTE_PATH = re.compile(r"transformers_modules|[/\\]huggingface[/\\]modules[/\\]")
_STDLIB_PATH = re.compile(r"^<frozen |[/\\]lib(?:64)?[/\\]python3\.\d+[/\\](?!site-packages|dist-packages)[\w]+"
                          r"(?:\.py|[/\\])|"
                          r"[/\\]Lib[/\\](?!site-packages)\w+(?:\.py|[/\\])")  # a Windows install's Lib folder
# A package pip is building or installing from source (its temporary build folder, or a virtual environment's
# src/ folder of VCS checkouts): a package's code, not the run's, though no site-packages is in the path
_PIP_BUILD_PATH = re.compile(r"[/\\]pip-(?:install|build-env|build|wheel)-\w+[/\\]([A-Za-z_][\w-]*?)"
                             r"(?:[_-][0-9a-f]{16,})?[/\\]|"
                             r"[/\\](?:\.virtualenvs|envs)[/\\][^/\\]+[/\\]src[/\\]([A-Za-z_]\w*)[/\\]|"
                             r"[/\\]pip-req-build-\w+[/\\]")  # the checkout pip builds: its folder has no name
# An environment's bin/ (or Scripts\) file without a .py suffix is an installed console script (torchrun,
# deepspeed, accelerate, llamafactory-cli): the launcher stub of a package, not the run's own code
_CONSOLE_SCRIPT = re.compile(r"[/\\](?:bin|Scripts)[/\\][\w.-]+$(?<!\.py)")
_CHAIN = re.compile(r"^(During handling of the above exception|The above exception was the direct cause)")
_ASCEND = re.compile(r"\b(E[A-Z][0-9A-Z]\d{3}|E\d{5})\b:?|error code is (5\d{5}|1\d{5})\b|\bERR\d{5}\b|"
                     r"\bAcl return error\b|with ERROR [15]\d{5}\b|"
                     r"\bHCCL function error\b|NPU function error|ACL function error")
_INFO = re.compile(r"^\s*(?:\[?\d{4}-\d\d-\d\d[ T][\d:,.]+\]?\s*)?(?:\[?\w*\s*\|?\s*)?\b(INFO|DEBUG)\b|"
                   r"NCCL INFO|HCCL INFO|^\s*\[?I\d{4} |\bINFO\b[:\]|]|\s-\s(?:INFO|DEBUG)\s-\s")
_WARN = re.compile(r"\bWARN(?:ING)?\b|^\s*\[?W\d{4} |^\s*\[W [\w.]+:\d+\]|^\s*W [\w.]+:\d+\]|Warning:|"
                   r"warnings\.warn\(|NCCL WARN")
_COLLECTIVE = re.compile(r"(?i)\b(nccl|hccl|gloo)\b.*(error|fail|timed? ?out|refused|closed by peer|reset by peer)|"
                         r"ncclSystemError|ncclInternalError|DistBackendError|Watchdog caught collective|"
                         r"pair\.cc:\d+\]\s*(?:Connection|connect|Read error)|socket.*(?:timed out|times out)|"
                         r"Getting socket times out|store->get\(.*\) got error")
# NCCL and HCCL log their own failures at WARN level: a WARN line naming a system or device error is a failure line
# (their routine WARN notices, a missing optional plugin or transport, stay warnings)
_COLLECTIVE_WARN_ERROR = re.compile(r"\b(?:NCCL|HCCL) WARN\b.*(?:No space left on device|Cannot allocate memory|"
                                    r"Connection (?:refused|reset|closed)|Broken pipe|unhandled (?:system|cuda) error|"
                                    r"Cuda failure|NCCL error|remote process exited)")
_OOM = re.compile(r"(?i)out of memory|OutOfMemoryError|\bOOM\b|Cannot allocate memory|HBM memory exhausted")
_KILLED = re.compile(r"exitcode\s*:\s*-9\b|\(exitcode: -9\)|\bSIGKILL\b|signal 9\b|^\s*Killed\s*$|"
                     r"exited with code 137\b")
_NONFINITE = re.compile(r"(?i)['\"]?\b(?:lm )?(loss|grad_norm|grad norm)['\"]?\s*(?:[:=]|is|became|becomes)\s*['\"]?"
                        r"(nan|inf)\b")
# An exception whose message says the real error is elsewhere: it is a wrapper, like ChildFailedError
_WRAPPER_MESSAGE = re.compile(r"(?i)returned non-zero exit status|died with <Signals|terminated with (?:exit code|signal)|"
                              r"see (?:the )?(?:above|previous) (?:traceback|error)|look up to see its traceback|"
                              r"exited with (?:exit )?code -?\d+")
# transformers' lazy import re-raises the import error inside its own message: the part after this is the real error
_INNER_AFTER = re.compile(r"because of the following error \(look up to see its traceback\):\s*")
# Frames of launchers and process plumbing: a traceback that ends there (its exception line cut off) says a child
# failed, not why
_PLUMBING_FRAME = re.compile(r"torch/distributed/(?:elastic|run\.py|launch\.py|launcher)|/subprocess\.py\"|"
                             r"accelerate/commands/|deepspeed/launcher/|torch/multiprocessing/spawn\.py|"
                             r"/bin/(?:torchrun|accelerate|deepspeed|llamafactory-cli|swift)\"|"
                             r"/importlib/__init__\.py\"|<frozen importlib|transformers/utils/import_utils\.py\"")
# a failed assertion, a CUDA kernel's included (its message may wrap before "failed")
_ASSERTION = r"Assertion `.*` failed|block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion "
_ERROR_LEVEL = re.compile(r"(?:^|[\[\s|])(ERROR|CRITICAL|FATAL|error)(?:[\]|:\s]|$)|" + _ASSERTION +
                          r"|Segmentation fault|\(core dumped\)|"  # a native crash
                          r"^\s*CMake Error\b|"  # a native extension's build: what its pip / setup.py wrapper hides
                          r"!!! CRITICAL|^\s*\[E[\s\d][^\]]*\]|^E\d{4} \d\d:|^Import failed: |"
                          r"\bfailed\b.*\b\w*Error\b:|^\s*size mismatch for \S+: copying a param with shape|"
                          r"\[Errno \d+\] \S")
_LOG_LEVEL_START = re.compile(r"\[?(?:ERROR|CRITICAL|FATAL)\b")  # another logger's line, not a continuation
_ELASTIC_FAILED = re.compile(r"failed \(exitcode: -?\d+\) local_rank: \d+")
_CHILD_ROOT = re.compile(r"Root Cause \(first observed failure\)")
_CHILD_FIELD = re.compile(r"^\s*(rank|exitcode|error_file)\s*:\s*(.*)$")

KIND_WEIGHT = {"gate": 9, "exception": 9, "ascend": 8, "known_message": 8, "collective": 7, "oom": 7, "nonfinite": 6,
               "killed": 6,
               # a cut traceback (its exception line missing) says only where; an error line says what
               "error_line": 4, "traceback": 3, "child_failed": 1}


@dataclass(frozen=True)
class Signal:
    kind: str
    text: str
    line: int
    rank: int | None = None
    wrapper: bool = False

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "text": self.text, "line": self.line, "rank": self.rank, "wrapper": self.wrapper}


@dataclass
class RootCause:
    signals: list[Signal] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    primary: Signal | None = None
    evidence: str = ""  # the failure lines (+ the decisive traceback's last frames), for matching and prompts
    failed_rank: int | None = None
    cause: str = ""  # the evidence without wrapper lines: what the lexical stage is asked about
    code_path: str = ""  # whose code the decisive traceback passes through (code_path()), for the LLM
    facts: list[str] = field(default_factory=list)  # what the installed libraries said (library_facts), for the LLM
    command: str = ""  # the last launch command the log shows before the decisive signal, for the LLM
    cut_later: str = ""  # the last frame of a traceback after the decisive signal whose exception line was cut off

    @property
    def failed(self) -> bool:
        """True when the log shows a failure signal beyond torchrun's wrapper summary."""
        return any(not s.wrapper for s in self.signals)

    def to_dict(self) -> dict[str, object]:
        return {"primary": self.primary.to_dict() if self.primary else None, "failed_rank": self.failed_rank,
                "signals": [s.to_dict() for s in self.signals[:20]], "warnings": self.warnings[-10:],
                "evidence": self.evidence, "code_path": self.code_path, "facts": self.facts, "command": self.command,
                "cut_later": self.cut_later}


OUTSIDE = "code outside installed packages"
CONSOLE_SCRIPT = "an installed console script"


def frame_origin(path: str) -> str:
    """Whose code a traceback frame's file is: 'library <name>' (an installed package, or one pip builds), 'stdlib',
    'remote code' (a checkpoint's code loaded by transformers), 'an installed console script' (torchrun's launcher
    stub) or 'code outside installed packages' (a script, a source checkout)."""
    if _REMOTE_PATH.search(path):
        return "remote code"
    found = _LIBRARY_PATH.search(path)
    if found:
        return f"library {found.group(1)}"
    built = _PIP_BUILD_PATH.search(path)
    if built:
        return f"library {built.group(1) or built.group(2) or '(unnamed)'} (installed from source by pip)"
    if _CONSOLE_SCRIPT.search(path):
        return CONSOLE_SCRIPT
    elided = _ELIDED_PATH.search(path)
    if elided and elided.group(1) in _installed_import_names():
        return f"library {elided.group(1)}"
    return "stdlib" if _STDLIB_PATH.search(path) else OUTSIDE


@lru_cache(maxsize=1)
def _installed_import_names() -> frozenset[str]:
    """Top-level import names of the installed distributions (torch, transformers, ...), for shortened paths."""
    return frozenset(importlib.metadata.packages_distributions())


def code_path(frames: list[str]) -> str:
    """The decisive traceback's frames by whose code they are, for the owner decision: where the error is raised,
    the innermost frame that is not an installed package (a script, a source checkout or a checkpoint's remote code:
    the code that called into the library), and the packages passed through. '' without frames."""
    parts = [m for m in (_FRAME_PARTS.search(f) for f in frames) if m]
    if not parts:
        return ""

    def where(m: re.Match) -> str:
        func = f" in {m.group(3)}" if m.group(3) else ""
        return f"{m.group(1)} line {m.group(2)}{func}"

    origins = [frame_origin(m.group(1)) for m in parts]
    said = [f"raised in {origins[-1]} ({where(parts[-1])})"]
    outside = [i for i, o in enumerate(origins) if o in (OUTSIDE, "remote code")]
    if outside and outside[-1] != len(parts) - 1:
        i = outside[-1]
        said.append(f"innermost frame outside installed packages: {origins[i]} ({where(parts[i])})")
    elif not outside:
        said.append("the frames shown are all installed packages / stdlib (the traceback may be cut above them)")
    libraries = list(dict.fromkeys(o.split(" ", 1)[1] for o in origins if o.startswith("library ")))
    if libraries:
        said.append("installed packages passed through: " + ", ".join(libraries))
    return "; ".join(said)


def with_gate_verdict(root: RootCause, verdict_lines: list[str]) -> RootCause:
    """Add the failed gate's own verdict (its problem lines: validator findings, missing batch keys, a constant
    loss) as the first failure signals. They come from the gate's code, not from the run's output, so they are
    evidence even when the log itself only has INFO lines."""
    return with_signals(root, "gate", verdict_lines)


def with_signals(root: RootCause, kind: str, lines: list[str]) -> RootCause:
    """Add ``lines`` as the first failure signals of ``kind`` (the gate's verdict; a line that states a known
    failure message the extractor had no rule for), and as the primary when the log had none but a wrapper."""
    lines = [line.strip() for line in lines if line and line.strip()]
    if not lines:
        return root
    added = [Signal(kind, line, -1) for line in lines]
    root.signals = added + root.signals
    if root.primary is None or root.primary.wrapper:
        root.primary = added[0]
    root.cause = "\n".join(dict.fromkeys(lines + root.cause.splitlines()))[-4000:]
    root.evidence = "\n".join(dict.fromkeys(lines + root.evidence.splitlines()))[-4000:]
    return root


def strip_prefixes(line: str) -> tuple[str, int | None]:
    """The line without launcher/logger prefixes, and the rank a prefix names (if any)."""
    rank = None
    found = _RANK_IN_PREFIX.search(line)
    if found:
        rank = int(next(g for g in found.groups() if g is not None))
    for _ in range(3):
        before = line
        for prefix in _PREFIXES:
            line = prefix.sub("", line, count=1)
        if line == before:
            break
    return line.rstrip(), rank


def line_level(line: str) -> str | None:
    """'warning' for a printed warning or a WARN-level line, 'info' for an INFO/DEBUG line, else None."""
    if _WARNING_CLASS.search(line) or _WARN.search(line[:120]) or _FORMATWARNING.match(line):
        return "warning"
    if _INFO.search(line[:80]):
        return "info"
    return None


def _continuation(lines: list[str], start: int, limit: int = 3, free: int = 2, skip_blank: bool = False) -> list[str]:
    """Lines that continue a multi-line message: indented lines and bare field paths (a validation error's block),
    plus up to ``free`` plain sentences. Stops at a blank line (unless ``skip_blank``: a header whose message follows
    after blank lines), a frame, a traceback, a table or a log line."""
    out = []
    for raw in lines[start + 1: start + 1 + limit]:
        text, _ = strip_prefixes(raw)
        stripped = text.strip()
        if not stripped and skip_blank:
            continue
        # a header's message may open with a bracketed tag ("[BytesIO]Unable to ..."): only then is "[" kept
        if not stripped or _TRACEBACK.search(text) or _FRAME.search(text) or _CHAIN.search(text) or \
                stripped[:1] in ("+|=#*>" if skip_blank else "+|=#*>[") or len(text) > 300 or \
                line_level(text) or _ELASTIC_FAILED.search(text) or _LOG_LEVEL_START.match(stripped) or \
                _SHELL_COMMAND.search(stripped):
            break
        indented = text[:1] in " \t"
        if not indented and _EXC.search(stripped):
            break
        if not indented and " " in stripped:
            if free <= 0:
                break
            free -= 1
        out.append(stripped)
    return out


def extract(log_text: str) -> RootCause:
    lines = (log_text or "").splitlines()
    signals: list[Signal] = []
    warnings: list[str] = []
    frames: dict[int, list[str]] = {}  # line of an exception -> last frames of its traceback
    all_frames: dict[int, list[str]] = {}  # line of an exception / a cut traceback -> all frames of its traceback
    in_traceback = False
    tb_frames: list[str] = []
    tb_start = -1
    child_rank: int | None = None
    in_child_root = False
    chains: dict[int, int] = {}  # line of a chained exception -> line of the first exception of its chain
    chained_from: int | None = None
    tb_source: tuple[int, str] | None = None  # the last line under the traceback's last frame (its source line)
    continued: tuple[int, set[str]] | None = None  # the last exception's line and the lines its message took in
    oom_warnings: list[Signal] = []  # warnings reporting an out-of-memory error a library caught and went on from

    def close_cut(tb_frames: list[str], start: int, source: tuple[int, str] | None, rank: int | None) -> None:
        """A traceback that ended without its exception line: a cut traceback signal, unless the last line under
        its last frame is a statement raising an exception with a literal message, which says what was raised."""
        raised = _RAISE_LITERAL.match(source[1]) if source else None
        if raised:
            line = source[0]
            signals.append(Signal("exception", f"{raised.group(1)}: {raised.group(3)}", line, rank))
            frames[line], all_frames[line] = tb_frames[-2:], list(tb_frames)
        else:
            signals.append(_traceback_signal(tb_frames, start, rank))
            all_frames[start] = list(tb_frames)

    for i, raw in enumerate(lines):
        text, rank = strip_prefixes(raw)
        stripped = text.strip()
        if not stripped:
            continue
        if _CHAIN.search(text):  # the next exception was raised while handling the previous one: that one is the cause
            exceptions_so_far = [s for s in signals if s.kind == "exception" and not s.wrapper]
            chained_from = chains.get(exceptions_so_far[-1].line, exceptions_so_far[-1].line) \
                if exceptions_so_far else None
            continue
        if _TRACEBACK.search(text):
            if in_traceback and tb_frames:  # a new traceback while the previous one had no exception line
                close_cut(tb_frames, tb_start, tb_source, rank)
            in_traceback, tb_frames, tb_start, tb_source = True, [], i, None
            continue
        if _CHILD_ROOT.search(text):
            in_child_root = True
            continue
        if in_child_root:
            field_match = _CHILD_FIELD.match(text)
            if field_match and field_match.group(1) == "rank":
                rank_match = re.match(r"(\d+)", field_match.group(2))
                child_rank = int(rank_match.group(1)) if rank_match else None
            elif field_match and field_match.group(1) == "exitcode":
                kind = "killed" if _KILLED.search(text) else "child_failed"
                signals.append(Signal(kind, f"rank {child_rank} {stripped}", i, child_rank,
                                      wrapper=kind == "child_failed"))
            if stripped.startswith("===="):
                in_child_root = False
            continue
        frame = _FRAME.search(text)
        if frame and not in_traceback:  # the excerpt starts mid-traceback: its header was cut off
            in_traceback, tb_frames, tb_start, tb_source = True, [], i, None
        after_frame = 0  # where an exception may start on this line: after a frame joined to it, if any
        if frame and in_traceback:
            tb_frames.append(stripped)
            tb_source = None
            parts = _FRAME_PARTS.search(stripped)
            after_frame = parts.end() if parts else len(stripped)
            if not _EXC.search(stripped, after_frame):  # a frame line, or a frame with its exception joined on
                continue
        if in_traceback and tb_frames and not frame and not _CARETS.match(stripped):
            tb_source = (i, stripped)
        level = line_level(text)
        exc = _EXC.search(stripped, after_frame)
        printed_warning = _WARNING_CLASS.search(stripped) or _FORMATWARNING.match(stripped)
        classed = bool(exc) and not printed_warning and level != "info"
        quoted = _INLINE_QUOTED.match(stripped)
        inner = quoted and _EXC.match(quoted.group(1))
        if inner:  # "`ValueError: x` when doing y": the message, not the prose
            stripped, exc = quoted.group(1), inner
        unfenced = _FENCE_EDGE.sub("", stripped)
        # a line an exception's message already took in (its continuation) is not an error of its own
        own_line = not exc and not (continued and i - continued[0] <= _HEADLESS_LIMIT + 1 and stripped in continued[1])
        bare = own_line and level != "info" and _BARE_CALL_ERROR.match(unfenced)
        attribute = own_line and level is None and _BARE_ATTRIBUTE_ERROR.search(unfenced)
        runtime = own_line and level is None and _BARE_RUNTIME_ERROR.search(unfenced)
        if bare:  # Python's bad-call message without its class: a TypeError, as it is
            signals.append(Signal("exception", unfenced, i, rank))
        elif attribute:  # an AttributeError's message without its class, from where it starts
            signals.append(Signal("exception", unfenced[attribute.start():], i, rank))
        elif runtime:  # a shape check's or the loader's message without its class: the whole line says it
            signals.append(Signal("exception", unfenced, i, rank))
        if classed:
            name = exc.group(1)
            # a header with no message of its own ("Error: [12:00:01] reader.cc:444:") is explained by what follows,
            # even across blank lines; otherwise only directly attached continuation lines belong to it
            if 'File "' in stripped[:exc.start()]:  # a traceback flattened onto one line: from the exception on
                stripped = stripped[exc.start():]
            body = (exc.group(2) or "").strip()
            headless = not body or body.endswith(":")
            extra = _continuation(lines, i, _HEADLESS_LIMIT, 2, skip_blank=True) if headless else \
                _continuation(lines, i)
            continued = (i, set(extra))
            message = _FENCE_EDGE.sub("", " ".join([stripped] + extra))
            wrapper = any(w in name for w in _WRAPPERS) or bool(_WRAPPER_MESSAGE.search(message))
            inner = _INNER_AFTER.split(message, maxsplit=1)
            if len(inner) == 2 and inner[1].strip():  # the re-raised import error: that is the cause
                signals.append(Signal("exception", message, i, rank, wrapper=True))
                signals.append(Signal("exception", inner[1].strip(), i, rank))
            else:
                signals.append(Signal("exception", message, i, rank, wrapper=wrapper))
        if bare or classed:  # an exception line ends its traceback
            if chained_from is not None:
                chains[signals[-1].line] = chained_from
            chained_from = None
            if in_traceback:
                frames[i] = tb_frames[-2:]
                all_frames[i] = list(tb_frames)
            in_traceback, tb_frames = False, []
            continue
        if level == "warning" and not _ASCEND.search(stripped) and not _COLLECTIVE_WARN_ERROR.search(stripped):
            warnings.append(stripped[:300])
            if _OOM.search(stripped):
                oom_warnings.append(Signal("oom", stripped[:800], i, rank))
            continue
        if level == "info":
            continue
        if _ELASTIC_FAILED.search(stripped):  # torchrun's "failed (exitcode: N) local_rank: ..." line
            killed = bool(_KILLED.search(stripped))
            signals.append(Signal("killed" if killed else "child_failed", stripped, i, rank, wrapper=not killed))
            continue
        for kind, pattern in (("ascend", _ASCEND), ("collective", _COLLECTIVE), ("oom", _OOM),
                              ("killed", _KILLED), ("nonfinite", _NONFINITE), ("error_line", _ERROR_LEVEL)):
            if pattern.search(stripped):
                extra = _continuation(lines, i, 12, 0) if kind in ("ascend", "error_line") else []
                signals.append(Signal(kind, " ".join([stripped] + extra)[:800], i, rank))
                break
    if in_traceback and tb_frames:
        close_cut(tb_frames, tb_start, tb_source, None)
    if oom_warnings and all(s.wrapper for s in signals):
        # nothing else says what failed: memory ran out where a library only warned (a state_dict clone, an
        # autotuner), and the run died of it later, past the excerpt's end
        signals = sorted(signals + oom_warnings, key=lambda s: s.line)
    root = _summarise(signals, warnings, frames, child_rank, chains)
    if root.primary is not None:
        shown = all_frames.get(root.primary.line)
        if shown is None and root.primary.kind != "exception":  # an error line decided: the cut traceback beside it
            cut = [s for s in signals if s.kind == "traceback" and not s.wrapper and s.line in all_frames]
            shown = all_frames[cut[-1].line] if cut else None
        root.code_path = code_path(shown or [])
        root.command = launch_command(lines, root.primary.line if root.primary.line >= 0 else len(lines))
        later = [s for s in signals if s.kind == "traceback" and not s.wrapper and s.line > root.primary.line]
        if root.primary.kind != "traceback" and later:  # another process's traceback, cut before its exception
            root.cut_later = later[-1].text
    return _with_device_assertion(root)


def launch_command(lines: list[str], before: int, max_lines: int = 8, max_chars: int = 600) -> str:
    """The last launch command the log shows before line ``before`` (with its backslash-continued lines), or ''."""
    for i in range(min(before, len(lines)) - 1, -1, -1):
        text, _ = strip_prefixes(lines[i])
        if not _LAUNCH_COMMAND.match(_FENCE_EDGE.sub("", text.strip())):
            continue
        command = [text.strip()]
        for raw in lines[i + 1: i + max_lines]:
            if not command[-1].endswith("\\"):
                break
            command.append(strip_prefixes(raw)[0].strip())
        joined = " ".join(command)
        return joined if len(joined) <= max_chars else joined[:max_chars] + " ..."
    return ""


_DEVICE_ASSERT = re.compile(r"device-side assert(?:ion)? triggered")
_KERNEL_ASSERTION = re.compile(_ASSERTION)


def _with_device_assertion(root: RootCause) -> RootCause:
    """A CUDA "device-side assert triggered" error says only that some kernel asserted; the kernel's own assertion
    line printed before it (an index out of range in an embedding or a loss) says which. Named in the primary."""
    primary = root.primary
    if primary is None or primary.kind != "exception" or not _DEVICE_ASSERT.search(primary.text):
        return root
    assertion = next((s for s in root.signals if s.line < primary.line and s.kind == "error_line"
                      and _KERNEL_ASSERTION.search(s.text)), None)
    if assertion is not None:
        text = f"{primary.text} (the kernel assertion printed before it: {assertion.text[:300]})"
        root.primary = Signal(primary.kind, text, primary.line, primary.rank, primary.wrapper)
        root.signals = [root.primary if s is primary else s for s in root.signals]
    return root


def _traceback_signal(tb_frames: list[str], start: int, rank: int | None) -> Signal:
    """A traceback whose exception line is missing, by its innermost frame of real code: frames of launchers,
    subprocess and import plumbing only say where a failure passed through (the caller of ``subprocess.
    check_output`` is what failed); a traceback of plumbing alone (torchrun's own) is a wrapper."""
    own = [f for f in tb_frames if not _PLUMBING_FRAME.search(f)]
    return Signal("traceback", own[-1] if own else tb_frames[-1], start, rank, wrapper=not own)


def _summarise(signals: list[Signal], warnings: list[str], frames: dict[int, list[str]],
               child_rank: int | None, chains: dict[int, int] | None = None) -> RootCause:
    root = RootCause(signals=signals, warnings=warnings)
    real = [s for s in signals if not s.wrapper]
    if not real:
        root.primary = signals[-1] if signals else None
        root.evidence = "\n".join(dict.fromkeys(s.text for s in signals))
        return root
    ranks = [s.rank for s in real if s.rank is not None]
    # the failing rank: the one torchrun names as root cause if it printed something, else the first to fail
    failed_rank = child_rank if child_rank in ranks else (ranks[0] if ranks else None)
    mine = [s for s in real if s.rank in (failed_rank, None)] or real
    exceptions = [s for s in mine if s.kind == "exception"]
    if exceptions:
        # the last exception, or the first link of its chain: the innermost error, which the later links handled;
        # a collective / store / socket error is what the other ranks see when one rank died of its own error,
        # so an earlier exception that is not one decides (the last such)
        own = [s for s in exceptions if not _COLLECTIVE.search(s.text)]
        last = own[-1] if own and _COLLECTIVE.search(exceptions[-1].text) else exceptions[-1]
        first_line = (chains or {}).get(last.line)
        root.primary = next((s for s in exceptions if s.line == first_line), last)
    else:
        root.primary = max(mine, key=lambda s: (KIND_WEIGHT.get(s.kind, 0), -s.line))
    root.failed_rank = failed_rank
    evidence = []
    for s in mine:
        evidence.extend(frames.get(s.line, []) if s is root.primary else [])
        evidence.append(s.text)
    root.cause = "\n".join(dict.fromkeys(evidence))[-4000:]
    evidence += [s.text for s in signals if s.wrapper]  # last: names the wrapper case when nothing else matches
    root.evidence = "\n".join(dict.fromkeys(evidence))[-4000:]
    return root
