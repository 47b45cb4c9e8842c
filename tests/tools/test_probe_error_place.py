"""A probe's error observation says where the exception came from (held-out Molmo-style model: logits are
``embedding_size`` wide, a plugin passed ``vocab_size=config.vocab_size`` to the loss, and check_forward answered
only "shape '[-1, 468]' is invalid for input of size 8192" — no line to look at)."""

from __future__ import annotations

import sys

from msmigrate.tools.runtime import PROBES_DIR

sys.path.append(str(PROBES_DIR))  # the probes import their siblings as top-level modules
import _model_build  # noqa: E402


def plugin_forward():
    import torch
    import torch.nn.functional as F

    logits = torch.zeros(2, 512)
    return F.cross_entropy(logits.view(-1, 468), torch.zeros(2, dtype=torch.long))  # the plugin's wrong width


def test_the_library_frame_and_the_calling_line_are_named():
    try:
        plugin_forward()
    except RuntimeError as exc:
        text = _model_build.error_with_place(exc)
        where = _model_build.raised_at(exc)
    assert text.startswith("RuntimeError: shape '[-1, 468]' is invalid")
    assert where["raised_in"].endswith("in plugin_forward")  # view() is C++: the calling line raised it
    assert "test_probe_error_place.py" in where["raised_in"]
    assert "raised in " in text and "test_probe_error_place.py" in text


def test_a_frame_inside_a_library_points_back_to_the_caller():
    import torch.nn.functional as F
    import torch

    def caller():
        return F.cross_entropy(torch.zeros(2, 5), torch.zeros(3, dtype=torch.long))  # batch sizes differ

    try:
        caller()
    except (ValueError, RuntimeError) as exc:
        where = _model_build.raised_at(exc)
        text = _model_build.error_with_place(exc)
    assert "torch" in where["raised_in"] and where["called_from"].endswith("in caller")
    assert where["code"].startswith("return F.cross_entropy(")
    assert "; called from " in text and "`return F.cross_entropy(" in text


def test_no_traceback_no_place():
    exc = ValueError("plain")
    assert _model_build.raised_at(exc) is None and _model_build.error_with_place(exc) == "ValueError: plain"


def test_a_file_under_the_working_dir_is_named_relative(monkeypatch, tmp_path):
    code = tmp_path / "plug.py"
    code.write_text("def run():\n    raise KeyError('image_bound')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import plug

    try:
        plug.run()
    except KeyError as exc:
        where = _model_build.raised_at(exc)
    assert where["raised_in"] == "plug.py:2 in run"


def test_a_syntax_error_is_placed_at_the_file_the_parser_could_not_read(monkeypatch, tmp_path):
    # the message names the file by its base name and the traceback ends in importlib: the place is the parser's
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "broken_plugin.py").write_text("x = 1\ndef forward(self)\n    return x\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    try:
        importlib.import_module("pkg.broken_plugin")
    except SyntaxError as exc:
        text = _model_build.error_with_place(exc)
    assert "raised in pkg/broken_plugin.py:2 in <module>" in text, text


def test_an_exception_raised_from_another_names_the_innermost_cause_and_only_that_chain():
    def library_import():
        try:
            getattr(__import__("types"), "NoSuchName")
        except AttributeError as exc:
            raise ModuleNotFoundError("Could not import module 'X'") from exc

    try:
        library_import()
    except ModuleNotFoundError as exc:
        text = _model_build.error_with_place(exc)
    assert text.startswith("ModuleNotFoundError: Could not import module 'X' (raised in ")
    assert "; caused by AttributeError: module 'types' has no attribute 'NoSuchName' (raised in " in text
    try:  # an exception raised while another was handled (no ``from``) is not a cause
        try:
            raise KeyError("handled")
        except KeyError:
            raise ValueError("own")
    except ValueError as exc:
        assert "caused by" not in _model_build.error_with_place(exc)
