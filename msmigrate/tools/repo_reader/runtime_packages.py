"""The target runtime's installed packages as a read-only tree for the repo_reader tools (``where="runtime"``).

Why: remote code imports transformers' own modules (``Qwen2RotaryEmbedding``, ``PreTrainedModel`` helpers) and the
target imports its dependencies; a player that needed to know what such a class does (where ``inv_freq`` is built, a
function's signature on *this* transformers) had no tool that could see them and guessed from memory of another
version. The root is the runtime interpreter's own ``purelib`` (asked once, in the runtime, not assumed from this
process), so what is read is what the target runs. Nothing here writes; ``resolve_inside`` keeps every path inside
that root. ``tree`` and ``grep`` need a package subdir: site-packages holds tens of thousands of files, and a walk of
all of them would cost seconds and say nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from msmigrate.core.tool_result import ToolResult
from msmigrate.tools.repo_reader.files import resolve_inside
from msmigrate.tools.runtime import run_process

PURELIB = "import sysconfig; print(sysconfig.get_paths()['purelib'])"


class RuntimePackages:
    """The runtime's site-packages directory, found on first use and remembered (one subprocess per run)."""

    def __init__(self, runtime_python: str):
        self.runtime_python = runtime_python
        self._root: Path | None = None
        self._error: str | None = None

    def root(self) -> Path | None:
        if self._root is None and self._error is None:
            try:
                out = run_process([self.runtime_python, "-c", PURELIB], timeout=60)
            except OSError as exc:  # no such interpreter: the tool says so, the run goes on
                self._error = f"the target runtime {self.runtime_python} cannot be started: {exc}"
                return None
            path = Path(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else None
            if path is not None and path.is_dir():
                self._root = path
            else:
                self._error = (f"the target runtime {self.runtime_python} did not name its packages directory "
                               f"(exit {out.returncode}): {out.stderr.strip()[-300:]}")
        return self._root

    def failure(self) -> ToolResult:
        return ToolResult.failure(self._error or "the target runtime's packages directory is unknown")

    def scoped(self, subdir: str, core: Callable[[Path], ToolResult]) -> ToolResult:
        """Run a tree/grep core on one package directory; its paths come back relative to the packages root, so a
        hit can be opened with ``read_file(where="runtime", path=...)`` as it stands."""
        root = self.root()
        if root is None:
            return self.failure()
        if not subdir.strip("/ ."):
            return ToolResult.failure("where='runtime' needs a package subdir (e.g. 'transformers/models/qwen2' or "
                                      "'transformers/modeling_rope_utils.py' via read_file): the packages directory "
                                      "is too large to walk whole")
        base = resolve_inside(root, subdir)
        if base is None or not base.is_dir():
            return ToolResult.failure(f"{subdir!r} is not a package directory of the target runtime ({root})")
        res = core(base)
        if not res.ok:
            return res
        prefix = base.relative_to(root.resolve()).as_posix().rstrip("/") + "/"
        data = dict(res.data)
        if "hits" in data:
            data["hits"] = [prefix + h for h in data["hits"]]
        data["root"] = "runtime packages"
        if "subdir" in data:
            data["subdir"] = subdir
        data["relative_to"] = prefix
        return ToolResult.success(**data)
