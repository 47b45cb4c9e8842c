"""Streaming parser for MindSpeed-MM plugin-route training logs (contract §9) and their failure modes (§13).

The formats parsed are the real ones:
- log prefix ``[Rank R | Local Rank L] <asctime> LEVEL [name:lineno] => msg``;
- the per-iteration line ``iteration N/ T | consumed samples: .. | elapsed time per iteration (ms): .. |
  learning rate: .. | global batch size: .. | loss: .. | [mtp_i loss: .. |] [aux loss: .. |] grad norm: .. |``
  (losses print ``NAN``/``INF`` via ``{:.6E}``, grad norm ``nan``/``inf`` via ``{:.3f}``);
- the one-off memory line, checkpoint save/load lines, the config-loading block (auto-registered fields and the
  "Dynamic Fields" list), plugin import lines;
- Python tracebacks (optionally ``[rankN]:``-prefixed by torchrun), torchrun's ``ChildFailedError`` summary,
  Ascend CANN/HCCL errors, OOM messages, torch_npu backend-load failures.

Memory stays bounded whatever the log size: per-iteration data is folded into running statistics, the loss curve is
decimated to at most ``CURVE_POINTS`` points, step times keep a bounded window, and every list of events is capped.
Speed: whole chunks without any rare marker take a fast path (one compiled ``finditer`` over the chunk); other
chunks go line by line with cheap substring checks before any regex.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from pydantic import BaseModel, Field

from msmigrate.core.tool_result import ToolResult

CURVE_POINTS = 2048  # max (iteration, loss) points kept for the loss curve
STEP_WINDOW = 4096  # step times kept for the median
MAX_EVENTS = 50  # cap for every list of events
CHUNK_BYTES = 8 << 20

PREFIX_RE = re.compile(
    r"^\[Rank (\d+) \| Local Rank (\d+)\] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ([A-Z]+) \[([^\]]+):(\d+)\] => ?(.*)$"
)
ITER_RE = re.compile(
    r"iteration\s+(\d+)/\s*(\d+) \| consumed samples:\s+(\d+) \| elapsed time per iteration \(ms\): ([-\d.naif]+) \|"
    r" learning rate: (\S+) \| global batch size:\s+(\d+) \|([^\n]*)"
)
ITER_TS_RE = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] iteration")
MEMORY_RE = re.compile(
    r"\(after (\d+) iterations\) memory \(MB\) \| allocated: ([\d.]+) \| max allocated: ([\d.]+) \|"
    r" reserved: ([\d.]+) \| max reserved: ([\d.]+)"
)
RANK_TAG_RE = re.compile(r"^\[(?:rank|default)(\d+)\]:\s?")
EXC_RE = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit|Iteration|Failure))(?::\s?(.*))?$")
CANN_CODE_RE = re.compile(r"\b(E[A-Z][0-9A-F]{4}|EE\d{4}|ERR\d{5})\b")
FIELD_RE = re.compile(r"Automatically registered YAML field: (\S+)")
CHILD_RE = re.compile(r"^\s*(rank|exitcode|traceback|host|time|error_file)\s*: (.*)$")
# torch's glog-style lines (``W1130 04:02:11.123000 5678 file.py:900] ...``) and ``[LEVEL]`` prints end a traceback.
GLOG_RE = re.compile(r"^[WEIF]\d{4} \d\d:\d\d:\d\d|^\[(?:INFO|WARNING|ERROR)\]")
HCCL_FAIL_RE = re.compile(r"(?i)\berror\b|fail|timed out|times out|time out|cannot open")
# Lines that cannot continue an exception message: framework prints, log-prefixed or bracketed lines.
FOREIGN_STARTS = ("Successfully imported:", "Import failed:", "[")
RANKID_RE = re.compile(r"RankID:(\d+)")
CFG_FILE_RE = re.compile(r"Loaded configuration file: (\S+)")

# Substrings that send a chunk (and a line) down the slow path. Anything the line handler reacts to must contain one.
# Substrings that send a line down the slow path; everything the line handlers react to (other than iteration lines)
# contains one of them. Kept short on purpose: each costs one C-speed scan per chunk. Exception lines contain "rror" or
# sit inside a "Traceback" block; torchrun's summary follows a ChildFailedError line; a CANN error code line
# ("EI0006: ...") is followed by CANN's own "TraceBack" line, so the slow path starts BACKUP_LINES before a hit.
RARE_MARKERS = (
    "Traceback", "TraceBack", "rror", "ERROR", "of memory", "d checkpoint ", "memory (MB)", "Dynamic Fields",
    "registered YAML", "imported:", "configuration file", "[WARNING] F", "falling back",
)
BACKUP_LINES = 4


@dataclass
class IterationRecord:
    iteration: int
    total: int
    consumed_samples: int
    elapsed_ms: float
    learning_rate: float
    global_batch_size: int
    losses: dict[str, float]
    grad_norm: float | None
    timestamp: str | None = None

    @property
    def loss(self) -> float:
        return self.losses.get("loss", math.nan)


@dataclass
class FailureSignature:
    kind: str  # oom | backend_load | exception | npu_runtime | hccl | config | child_failed | nonfinite_loss | exit_code | incomplete | no_iterations
    line: str  # the root error line as printed (prefixes stripped)
    key: str  # normalized key text (root line + related error lines) that a classifier regexes against
    rank: int | None = None


@dataclass
class LogSummary:
    steps: int = 0
    last_iteration: int | None = None
    total_iterations: int | None = None
    completed: bool = False  # last iteration line reads N/N
    exit_code: int | None = None
    success: bool = False  # exit 0 AND completed AND all losses finite
    first_loss: float | None = None
    last_loss: float | None = None
    min_loss: float | None = None
    max_loss: float | None = None
    loss_trend: str | None = None  # decreasing | flat | increasing (None with < 2 finite losses)
    loss_finite: bool = True
    loss_constant: bool | None = None
    extra_loss_names: list[str] = field(default_factory=list)
    last_grad_norm: float | None = None
    median_step_ms: float | None = None
    samples_per_s: float | None = None
    global_batch_size: int | None = None
    loss_curve: list[tuple[int, float]] = field(default_factory=list)
    memory: dict[str, float] | None = None
    checkpoints_saved: list[str] = field(default_factory=list)
    checkpoint_loaded: str | None = None
    hf_weights_loaded: str | None = None  # the folder of "Loading HF safetensors -> FSDP DTensors ... dir=<path>"
    hf_weights_missing: str | None = None  # "N parameter key(s) absent from the HF checkpoint ..." (left unloaded)
    config_file: str | None = None
    auto_registered_fields: list[str] = field(default_factory=list)
    dynamic_fields: list[str] = field(default_factory=list)
    config_warnings: list[str] = field(default_factory=list)  # "Field path 'x' does not exist", "Found undefined field"
    warning_lines: list[str] = field(default_factory=list)  # WARNING log lines about a failure / fallback
    plugins_imported: list[str] = field(default_factory=list)
    plugin_import_failures: list[str] = field(default_factory=list)
    exceptions: list[dict[str, Any]] = field(default_factory=list)  # {type, message, rank}, in order seen
    root_exception: dict[str, Any] | None = None
    first_failing_rank: int | None = None
    child_failure: dict[str, Any] | None = None
    error_lines: list[str] = field(default_factory=list)
    cann_error_codes: list[str] = field(default_factory=list)
    oom: bool = False
    failure_signature: FailureSignature | None = None
    lines: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _num(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def _parse_iteration(m: re.Match) -> IterationRecord:
    losses: dict[str, float] = {}
    grad = None
    for part in m.group(7).split("|"):
        name, sep, value = part.rpartition(": ")
        if not sep:
            continue
        name = name.strip()
        if name == "grad norm":
            grad = _num(value.strip())
        else:
            losses[name] = _num(value.strip())
    return IterationRecord(
        int(m.group(1)), int(m.group(2)), int(m.group(3)), _num(m.group(4)), _num(m.group(5)), int(m.group(6)),
        losses, grad,
    )


def normalize(text: str) -> str:
    """Key text for classifiers: no log prefixes, timestamps, pids or addresses; single spaces."""
    text = PREFIX_RE.sub(r"\7", text)
    text = RANK_TAG_RE.sub("", text)
    text = re.sub(r"\d{4}-\d\d-\d\d[ _T-]\d\d:\d\d:\d\d(?:[,.]\d+)?", "<ts>", text)
    text = re.sub(r"0x[0-9a-fA-F]+", "<addr>", text)
    text = re.sub(r"\b(pid|PID)[:= ]+\d+", r"\1 <pid>", text)
    return re.sub(r"\s+", " ", text).strip()


class LogWatcher:
    """Incremental parser: ``feed(line)`` / ``feed_text(chunk)`` then ``summary(exit_code)``.

    ``fatal`` turns non-None (a FailureSignature) as soon as a pattern is seen that means the job cannot succeed; the
    launcher uses it to stop early. ``on_iteration`` (optional) is called with every IterationRecord."""

    def __init__(self, on_iteration=None, stop_on_nonfinite: bool = True):
        self.s = LogSummary()
        self.on_iteration = on_iteration
        self.stop_on_nonfinite = stop_on_nonfinite
        self.fatal: FailureSignature | None = None
        self._curve: list[tuple[int, float]] = []
        self._stride = 1
        self._steps_ms: deque[float] = deque(maxlen=STEP_WINDOW)
        self._finite_losses = 0
        self._in_tb = False
        self._tb_rank: int | None = None
        self._tb_tagged = False  # the traceback's lines carry a "[rankN]:" tag
        self._exc_open: dict[str, Any] | None = None  # exception whose message may continue on next lines
        self._in_dynamic = False
        self._child_block: dict[str, Any] | None = None
        self._in_root_cause = False
        self._special: list[tuple[str, str, int | None]] = []  # (kind, line, rank) for oom/backend/cann/hccl/config
        self._last_rank: int | None = None
        self._cfg_open = False
        self._first_fatal: str | None = None  # kind of the first fatal pattern seen (whether or not it stops the job)

    # ---------------------------------------------------------------- feeding
    def feed_text(self, text: str) -> None:
        """Feed a chunk made of whole lines.

        Stretches of lines without any rare marker go through one compiled ``finditer`` for iteration lines (no
        per-line Python); a line holding a marker, and the lines after it while a multi-line block is open
        (traceback, Dynamic Fields list, torchrun summary), go through ``feed``."""
        if not text:
            return
        n, pos = len(text), 0
        if text[-1:] != "\n":
            text += "\n"
            n += 1
        nexts = {mk: -1 for mk in RARE_MARKERS}  # cached next occurrence of each marker (-1: not searched yet)
        # The last lines of a chunk always take the slow path: a marker at the start of the next chunk may belong to
        # them (a CANN code line followed by its TraceBack line).
        tail = _line_start(text, 0, n - 1, BACKUP_LINES - 1)
        while pos < n:
            if pos < tail and self._idle():
                hit = tail
                for mk, at in nexts.items():
                    if at < pos:
                        at = text.find(mk, pos)
                        nexts[mk] = at = n if at < 0 else at
                    hit = min(hit, at)
                if pos == 0 and text[:1] == "E":  # a chunk may start with a CANN code line ("EZ9999: ...")
                    hit = 0
                end = tail if hit == tail else _line_start(text, pos, hit, BACKUP_LINES)
                if end > pos:
                    self._bulk(text, pos, end)
                    self.s.lines += text.count("\n", pos, end)
                    pos = end
                    continue
            nl = text.find("\n", pos)
            self.feed(text[pos:nl])
            pos = nl + 1

    def _bulk(self, text: str, pos: int, end: int) -> None:
        """Fold all iteration lines of ``text[pos:end]`` at once (columns via ``findall``), falling back to the
        per-record path when a callback wants records, or a line has extra losses or a non-finite loss."""
        rows = ITER_RE.findall(text, pos, end)
        if not rows:
            return
        tails = [r[6] for r in rows]
        simple = self.on_iteration is None and all(
            t.startswith(" loss: ") and t.count("|") == 2 and " grad norm: " in t for t in tails
        )
        if simple:
            try:
                losses = [float(t[7 : t.index(" |")]) for t in tails]
                grads = [float(t[t.index("grad norm: ") + 11 : -2]) for t in tails]
                elapsed = [float(r[3]) for r in rows]
            except ValueError:
                simple = False
        if not simple or not all(map(math.isfinite, losses)):
            for m in ITER_RE.finditer(text, pos, end):
                self._iteration(_parse_iteration(m), m)
            return
        s, last = self.s, rows[-1]
        s.steps += len(rows)
        s.last_iteration, s.total_iterations, s.global_batch_size = int(last[0]), int(last[1]), int(last[5])
        if s.first_loss is None:
            s.first_loss = losses[0]
        s.last_loss, s.last_grad_norm = losses[-1], grads[-1]
        lo, hi = min(losses), max(losses)
        s.min_loss = lo if s.min_loss is None else min(s.min_loss, lo)
        s.max_loss = hi if s.max_loss is None else max(s.max_loss, hi)
        self._finite_losses += len(losses)
        self._steps_ms.extend(v for v in elapsed if math.isfinite(v))
        for r, loss in zip(rows, losses):
            it = int(r[0])
            if it % self._stride == 0:
                self._curve.append((it, loss))
                if len(self._curve) >= CURVE_POINTS:
                    self._curve = self._curve[::2]
                    self._stride *= 2

    def _idle(self) -> bool:
        return not (self._in_tb or self._in_dynamic or self._cfg_open or self._child_block is not None)

    def feed(self, line: str) -> None:
        self.s.lines += 1
        line = line.rstrip("\r\n")
        if "iteration" in line and "consumed samples" in line:
            m = ITER_RE.search(line)
            if m:
                self._close_exception()
                self._iteration(_parse_iteration(m), m)
                return
        if "[Rank " in line[:8]:  # a framework log line also ends any open traceback message
            m = PREFIX_RE.match(line)
            if m:
                self._last_rank = int(m.group(1))
                self._close_exception()
                self._in_tb = False
                self._message(m.group(7), line, int(m.group(1)), m.group(4))
                return
        self._plain(line)

    # ---------------------------------------------------------------- handlers
    def _iteration(self, rec: IterationRecord, m: re.Match) -> None:
        s = self.s
        ts = ITER_TS_RE.search(m.string, max(0, m.start() - 40), m.start() + 10)
        rec.timestamp = ts.group(1) if ts else None
        s.steps += 1
        s.last_iteration, s.total_iterations, s.global_batch_size = rec.iteration, rec.total, rec.global_batch_size
        loss = rec.loss
        for name in rec.losses:
            if name != "loss" and name not in s.extra_loss_names and len(s.extra_loss_names) < MAX_EVENTS:
                s.extra_loss_names.append(name)
        if rec.grad_norm is not None:
            s.last_grad_norm = rec.grad_norm
        if all(math.isfinite(v) for v in rec.losses.values()):
            if s.first_loss is None:
                s.first_loss = loss
            s.last_loss = loss
            s.min_loss = loss if s.min_loss is None else min(s.min_loss, loss)
            s.max_loss = loss if s.max_loss is None else max(s.max_loss, loss)
            self._finite_losses += 1
            if rec.iteration % self._stride == 0:
                self._curve.append((rec.iteration, loss))
                if len(self._curve) >= CURVE_POINTS:  # decimate: keep every other point, double the stride
                    self._curve = self._curve[::2]
                    self._stride *= 2
        else:
            s.last_loss = loss
            if s.loss_finite:
                s.loss_finite = False
                bad = ", ".join(f"{k}={v}" for k, v in rec.losses.items() if not math.isfinite(v))
                self._note("nonfinite_loss", f"non-finite loss at iteration {rec.iteration}: {bad}", 0, fatal=True)
        if math.isfinite(rec.elapsed_ms):
            self._steps_ms.append(rec.elapsed_ms)
        if self.on_iteration is not None:
            self.on_iteration(rec)

    def _message(self, msg: str, line: str, rank: int, level: str) -> None:
        s = self.s
        if "Saved checkpoint to" in msg:
            if len(s.checkpoints_saved) >= MAX_EVENTS:
                s.checkpoints_saved.pop(0)
            s.checkpoints_saved.append(msg.split("Saved checkpoint to", 1)[1].strip())
        elif "Loaded checkpoint from" in msg:
            s.checkpoint_loaded = msg.split("Loaded checkpoint from", 1)[1].strip()
        elif "Loading HF safetensors" in msg and " dir=" in msg:
            s.hf_weights_loaded = msg.split(" dir=", 1)[1].split(" arch=", 1)[0].strip()
        elif "absent from the HF checkpoint" in msg:
            s.hf_weights_missing = normalize(msg)[:2000]
        elif level in ("ERROR", "CRITICAL"):
            if not self._special_patterns(msg, rank):
                self._error_line(line)
        elif level == "WARNING" and ("fail" in msg or "falling back" in msg):
            if len(s.warning_lines) < MAX_EVENTS:  # e.g. "AutoConfig.from_pretrained failed for ... falling back"
                s.warning_lines.append(normalize(msg))
        else:
            self._plain(msg, rank)

    def _plain(self, line: str, rank: int | None = None) -> None:
        s = self.s
        tag = RANK_TAG_RE.match(line) if line[:1] == "[" else None
        if tag:
            rank = int(tag.group(1))
            line = line[tag.end():]
        if self._child_block is not None:
            if self._child(line):
                return
        if self._in_dynamic:
            stripped = line.strip()
            if stripped and not stripped.startswith("=") and len(s.dynamic_fields) < 500:
                s.dynamic_fields.append(stripped.lstrip("-• ").strip())
                return
            if stripped.startswith("=") or not stripped:
                self._in_dynamic = bool(stripped) and "Dynamic Fields" in stripped
                return
        if self._cfg_open:
            if line.strip() and "Traceback" not in line and len(self._special[-1][1]) < 2000:
                kind, text, r = self._special[-1]
                self._special[-1] = (kind, normalize(text + " " + line), r)
                return
            self._cfg_open = False
        if "Traceback (most recent call last)" in line:
            self._close_exception()
            self._in_tb, self._tb_rank, self._tb_tagged = True, rank, tag is not None
            return
        if "ChildFailedError" in line and self._child_block is None and not line[:1].isspace():
            self._exception("torch.distributed.elastic.multiprocessing.errors.ChildFailedError", "", rank)
            self._child_block = {}
            return
        if self._in_tb and GLOG_RE.match(line):
            self._close_exception()
            self._in_tb = False
        if self._in_tb and (
            (tag is not None) != self._tb_tagged or (tag is not None and rank != self._tb_rank)
            or line.startswith(FOREIGN_STARTS)
        ):
            self._close_exception()  # another rank's or the framework's output: the exception message is over
        elif self._in_tb:
            if line.startswith((" ", "\t")) or not line.strip():
                if self._exc_open is not None and line.strip():
                    self._continue_exception(line)
                return
            if line.startswith(("During handling", "The above exception")):
                self._close_exception()
                return
            m = EXC_RE.match(line)
            if m:
                exc_rank = rank if rank is not None else self._tb_rank
                self._special_patterns(line, exc_rank)  # first, so an OOM/backend error names the fatal kind
                self._exception(m.group(1), (m.group(2) or "").strip(), exc_rank)
                return
            if self._exc_open is not None:
                self._continue_exception(line)
                return
        if "Dynamic Fields" in line and "===" in line:
            self._in_dynamic = True
            return
        if "Automatically registered YAML field:" in line:
            m = FIELD_RE.search(line)
            if m and len(s.auto_registered_fields) < 500:
                s.auto_registered_fields.append(m.group(1))
            return
        if "Loaded configuration file:" in line:
            m = CFG_FILE_RE.search(line)
            s.config_file = m.group(1) if m else s.config_file
            return
        if "Successfully imported:" in line:
            if len(s.plugins_imported) < MAX_EVENTS:
                s.plugins_imported.append(line.split("Successfully imported:", 1)[1].strip())
            return
        if "Import failed:" in line:
            if len(s.plugin_import_failures) < MAX_EVENTS:
                s.plugin_import_failures.append(normalize(line.split("Import failed:", 1)[1]))
            self._error_line(line)
            return
        if line.startswith(("[WARNING] Field path", "[WARNING] Found undefined field")):
            if len(s.config_warnings) < MAX_EVENTS:  # unknown YAML section / ignored key (contract §2.1)
                s.config_warnings.append(line[len("[WARNING] "):].strip())
            return
        if "memory (MB)" in line:
            m = MEMORY_RE.search(line)
            if m:
                keys = ("after_iterations", "allocated", "max_allocated", "reserved", "max_reserved")
                s.memory = {k: float(v) for k, v in zip(keys, m.groups())}
            return
        self._special_patterns(line, rank)

    def _special_patterns(self, line: str, rank: int | None) -> bool:
        """Failure patterns of contract §13 (OOM, backend load, config, HCCL, CANN codes); True if one matched."""
        if "out of memory" in line or "can't allocate" in line or "OutOfMemoryError" in line:
            self.s.oom = True
            self._note("oom", line, rank, fatal=True)
        elif "Failed to load the backend extension" in line or "cannot open shared object file" in line:
            self._note("backend_load", line, rank, fatal=True)
        elif "[ERROR] Configuration loading failed" in line or "YAML parsing failed" in line:
            self._note("config", line, rank)
            self._cfg_open = len(self._special) < MAX_EVENTS  # pydantic's message continues on the next lines
        elif ("HCCL" in line or "hccl" in line) and HCCL_FAIL_RE.search(line) and "HCCL_CONNECT_TIMEOUT=" not in line:
            self._note("hccl", line, rank, fatal=True)
        elif ("rror" in line or "ERR" in line or line[:1] == "E") and CANN_CODE_RE.search(line):
            codes = self.s.cann_error_codes
            for code in CANN_CODE_RE.findall(line):
                if code not in codes and len(codes) < MAX_EVENTS:
                    codes.append(code)
            self._note("npu_runtime", line, rank, fatal=True)
        elif "[ERROR]" in line or "ERROR" in line[:40]:
            self._error_line(line)
        else:
            return False
        return True

    def _child(self, line: str) -> bool:
        """Inside torchrun's ChildFailedError summary: collect the root-cause entry (or the first failure)."""
        stripped = line.strip()
        if stripped.startswith("Root Cause"):
            self._in_root_cause, self._child_block = True, {}
            return True
        m = CHILD_RE.match(line)
        if m:
            self._child_block[m.group(1)] = m.group(2).strip()
            return True
        if stripped.startswith("=") and self._in_root_cause:
            self._finish_child()
            return True
        if stripped == "" or stripped.startswith(("-", "=", "[", "Failures", "<NO_OTHER_FAILURES>")) or stripped.endswith(
            "FAILED"
        ):
            return True
        self._finish_child()
        return False

    def _finish_child(self) -> None:
        block, self._child_block, self._in_root_cause = self._child_block or {}, None, False
        info: dict[str, Any] = {"raw": block}
        if m := re.match(r"(-?\d+)", block.get("rank", "")):
            info["rank"] = int(m.group(1))
        if m := re.match(r"(-?\d+)(?: \(pid: (\d+)\))?", block.get("exitcode", "")):
            info["exitcode"] = int(m.group(1))
        if "Signal" in block.get("traceback", ""):
            info["signal"] = block["traceback"]
        self.s.child_failure = info
        self._in_tb = False

    def _exception(self, etype: str, message: str, rank: int | None) -> None:
        self._close_exception()
        exc = {"type": etype, "message": message, "rank": rank}
        if len(self.s.exceptions) < MAX_EVENTS:
            self.s.exceptions.append(exc)
        self._exc_open = exc
        if "ChildFailedError" not in etype and etype not in ("KeyboardInterrupt", "SystemExit"):
            self._fatal_seen("exception")

    def _continue_exception(self, line: str) -> None:
        exc = self._exc_open
        if exc is not None and exc["message"].count("\n") < 8 and "ChildFailedError" not in exc["type"]:
            exc["message"] = (exc["message"] + "\n" + line.strip()).strip()

    def _close_exception(self) -> None:
        self._exc_open = None

    def _error_line(self, line: str) -> None:
        if len(self.s.error_lines) < MAX_EVENTS:
            self.s.error_lines.append(normalize(line))

    def _note(self, kind: str, line: str, rank: int | None, fatal: bool = False) -> None:
        if rank is None and (m := RANKID_RE.search(line)):
            rank = int(m.group(1))
        if len(self._special) < MAX_EVENTS:
            self._special.append((kind, normalize(line), rank if rank is not None else self._last_rank))
        self._error_line(line)
        if fatal:
            self._fatal_seen(kind)

    def _fatal_seen(self, kind: str) -> None:
        if self._first_fatal is None:
            self._first_fatal = kind
        if self.fatal is None and (kind != "nonfinite_loss" or self.stop_on_nonfinite):
            self.fatal = self._signature(kind)

    # ---------------------------------------------------------------- summary
    def _signature(self, prefer: str | None = None) -> FailureSignature | None:
        s = self.s
        real_exc = [e for e in s.exceptions if "ChildFailedError" not in e["type"]]
        root = real_exc[0] if real_exc else (s.exceptions[0] if s.exceptions else None)
        key_parts = [f"{e['type']}: {e['message']}" for e in s.exceptions[:6]]
        key_parts += [line for _, line, _ in self._special[:6]] + s.plugin_import_failures[:4] + s.warning_lines[:2]
        key_parts = list(dict.fromkeys(key_parts))
        for kind in (prefer, "oom", "backend_load"):
            hit = next((sp for sp in self._special if sp[0] == kind), None)
            if hit:
                return FailureSignature(kind, hit[1], normalize(" | ".join([hit[1], *key_parts])), hit[2])
        if root is not None and "ChildFailedError" not in root["type"]:
            line = f"{root['type']}: {root['message']}".strip()
            return FailureSignature("exception", line, normalize(" | ".join(key_parts)), root["rank"])
        for kind in ("npu_runtime", "hccl", "config"):
            hit = next((sp for sp in self._special if sp[0] == kind), None)
            if hit:
                return FailureSignature(kind, hit[1], normalize(" | ".join([hit[1], *key_parts])), hit[2])
        if s.child_failure is not None:
            cf = s.child_failure
            line = f"ChildFailedError: rank {cf.get('rank')} exitcode {cf.get('exitcode')} {cf.get('signal', '')}".strip()
            return FailureSignature("child_failed", line, normalize(" | ".join([line, *key_parts])), cf.get("rank"))
        if s.error_lines:
            return FailureSignature("error_line", s.error_lines[0], normalize(" | ".join(s.error_lines[:4])))
        return None

    def summary(self, exit_code: int | None = None) -> LogSummary:
        s = self.s
        self._close_exception()
        if self._child_block is not None:
            self._finish_child()
        s.exit_code = exit_code
        s.loss_curve = list(self._curve)
        s.completed = s.steps > 0 and s.last_iteration == s.total_iterations
        if self._steps_ms:
            window = list(self._steps_ms)
            if len(window) > 1 and s.steps == len(window):
                window = window[1:]  # the first step includes warm-up/compilation
            s.median_step_ms = round(statistics.median(window), 3)
            if s.global_batch_size and s.median_step_ms > 0:
                s.samples_per_s = round(s.global_batch_size * 1000.0 / s.median_step_ms, 3)
        if self._finite_losses >= 2:
            s.loss_constant = s.max_loss == s.min_loss
            s.loss_trend = _trend([v for _, v in self._curve] or [s.first_loss, s.last_loss])
        if s.child_failure and s.child_failure.get("rank") is not None:
            s.first_failing_rank = s.child_failure["rank"]
        real_exc = [e for e in s.exceptions if "ChildFailedError" not in e["type"]]
        s.root_exception = real_exc[0] if real_exc else (s.exceptions[0] if s.exceptions else None)
        if s.first_failing_rank is None and s.root_exception is not None:
            s.first_failing_rank = s.root_exception["rank"]
        s.success = exit_code == 0 and s.completed and s.loss_finite
        sig = self._signature(self._first_fatal)
        if sig is None and not s.success:
            if not s.loss_finite:
                sig = self._signature("nonfinite_loss")
            elif exit_code not in (None, 0):
                sig = FailureSignature("exit_code", f"process exited with code {exit_code}", f"exit code {exit_code}")
            elif s.steps == 0:
                sig = FailureSignature("no_iterations", "no iteration line in the log", "no iteration line")
            elif not s.completed:
                line = f"stopped at iteration {s.last_iteration}/{s.total_iterations}"
                sig = FailureSignature("incomplete", line, line)
        s.failure_signature = None if s.success else sig
        return s


def _line_start(text: str, lo: int, at: int, back: int) -> int:
    """Start of the line ``back`` lines before the one holding ``text[at]``, not before ``lo``."""
    cut = text.rfind("\n", lo, at)
    for _ in range(back):
        if cut < 0:
            return lo
        cut = text.rfind("\n", lo, cut)
    return lo if cut < 0 else cut + 1


def _trend(values: list[float]) -> str:
    """Compare the mean of the first and last thirds (at least one point each). Within ±0.25 % (relative) counts
    as flat: tiny smoke runs of a few steps move the loss by well under 1 %, and a constant loss is caught apart."""
    n = max(1, len(values) // 3)
    head, tail = sum(values[:n]) / n, sum(values[-n:]) / n
    scale = max(abs(head), 1e-12)
    if tail < head - 0.0025 * scale:
        return "decreasing"
    if tail > head + 0.0025 * scale:
        return "increasing"
    return "flat"


def iter_chunks(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterable[str]:
    """Yield decoded chunks of whole lines, reading ``chunk_bytes`` at a time."""
    rest = b""
    with open(path, "rb") as fh:
        while True:
            block = fh.read(chunk_bytes)
            if not block:
                break
            block = rest + block
            cut = block.rfind(b"\n")
            if cut < 0:
                rest = block
                continue
            rest = block[cut + 1:]
            yield block[: cut + 1].decode("utf-8", errors="replace")
    if rest:
        yield rest.decode("utf-8", errors="replace") + ("" if rest.endswith(b"\n") else "\n")


def parse_log(source: str | Path | Iterable[str], exit_code: int | None = None) -> LogSummary:
    """Parse a log file (path) or any iterable of lines (a list, a live stream) into a LogSummary."""
    watcher = LogWatcher(stop_on_nonfinite=False)
    if isinstance(source, (str, Path)):
        for chunk in iter_chunks(Path(source)):
            watcher.feed_text(chunk)
    else:
        for line in source:
            watcher.feed(line)
    return watcher.summary(exit_code)


# ---------------------------------------------------------------- LangChain tool
class ParseLogArgs(BaseModel):
    log_path: str = Field(description="Path of a training log (train.log of a launch, or any torchrun output).")
    exit_code: int | None = Field(default=None, description="Process exit code if known; success needs exit 0.")


def parse_log_tool_core(log_path: str, exit_code: int | None = None) -> ToolResult:
    path = Path(log_path)
    if not path.is_file():
        return ToolResult.failure(f"log file not found: {log_path}")
    summary = parse_log(path, exit_code).to_dict()
    curve = summary.pop("loss_curve")
    summary["loss_curve_head"] = curve[:10]
    summary["loss_curve_tail"] = curve[-10:]
    return ToolResult.success(**summary)


def make_parse_log_tool():
    from msmigrate.core.tool_result import make_tool

    return make_tool(
        "parse_training_log",
        "Summarise a MindSpeed-MM training log: iterations, loss trend/finiteness, step time, samples/s, checkpoints, "
        "dynamic (ignored) YAML fields, and the root failure signature.",
        ParseLogArgs,
        parse_log_tool_core,
    )
