"""``where="runtime"``: the read tools see the target runtime's installed packages (what the source's remote code
imports from transformers), read-only and scoped to that directory (live players could not read
``Qwen2RotaryEmbedding`` and guessed its attributes from another transformers version)."""

from __future__ import annotations

import json
import sys
import sysconfig
from pathlib import Path

from msmigrate.core.run_context import RunContext
from msmigrate.tools.repo_reader import repo_reader_tools


def tools(tmp_path: Path, python: str = sys.executable) -> dict:
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "tgt").mkdir(exist_ok=True)
    ctx = RunContext(run_id="unit", run_dir=tmp_path / "run", source=tmp_path / "src", target=tmp_path / "tgt",
                     model_name="m", runtime_python=python)
    return {t.name: t for t in repo_reader_tools(ctx)}


def call(tool, **args) -> dict:
    return json.loads(tool.invoke(args))


def test_grep_and_read_the_runtimes_transformers(tmp_path):
    t = tools(tmp_path)
    found = call(t["grep"], where="runtime", subdir="transformers/models/qwen2", pattern=r"^class Qwen2RotaryEmbedding")
    assert found["ok"], found
    hit = found["data"]["hits"][0]
    path, line = hit.split(":")[0], int(hit.split(":")[1])
    assert path == "transformers/models/qwen2/modeling_qwen2.py"
    read = call(t["read_file"], where="runtime", path=path, start=line, end=line + 3)
    assert read["ok"] and "class Qwen2RotaryEmbedding" in read["data"]["text"]
    outline = call(t["python_outline"], where="runtime", path=path, class_name="Qwen2RotaryEmbedding")
    assert outline["ok"] and "forward" in json.dumps(outline["data"])
    listed = call(t["repo_tree"], where="runtime", subdir="transformers/models/qwen2")
    assert listed["ok"] and "modeling_qwen2.py" in listed["data"]["tree"]
    # the root is the runtime interpreter's own packages directory (here the test's interpreter)
    assert (Path(sysconfig.get_paths()["purelib"]) / path).is_file()


def test_runtime_root_is_scoped_and_read_only(tmp_path):
    t = tools(tmp_path)
    whole = call(t["grep"], where="runtime", pattern="import")  # no package named: too large to walk
    assert not whole["ok"] and "needs a package subdir" in whole["error"]
    out = call(t["read_file"], where="runtime", path="../../../../etc/passwd")
    assert not out["ok"] and "outside the root" in out["error"]
    missing = call(t["repo_tree"], where="runtime", subdir="no_such_package_xyz")
    assert not missing["ok"] and "not a package directory" in missing["error"]
    assert "runtime" not in json.dumps(call(t["read_file"], where="target", path="nope")).split("error")[0]


def test_a_runtime_that_cannot_answer_is_an_error_observation(tmp_path):
    t = tools(tmp_path, python=str(tmp_path / "no-python"))
    out = call(t["read_file"], where="runtime", path="transformers/__init__.py")
    assert not out["ok"] and "packages directory" in out["error"]
