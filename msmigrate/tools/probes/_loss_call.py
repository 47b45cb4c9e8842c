"""How a model's forward calls ``self.loss_function`` (runs in the target runtime; imports nothing from msmigrate).

The framework's engine replaces ``model.loss_function`` for any ``features.loss_cfg.loss_type`` but ``raw`` with its
own, which takes the batch's labels when the model passes none and aligns them with the logits it is handed, one
per position. A forward that passes ``labels=None`` computes its own targets instead (GIT: ``shift_labels`` with the
image positions cut off the logits), so the engine's function gets logits its labels do not line up with (the
stand-in raised "labels must be provided", the real one would pair T text labels with T-1 logits). Such a model
trains with its own loss: ``loss_type: raw``.
"""
import ast
import inspect
import textwrap


def passes_no_labels(cls):
    """Whether ``cls.forward`` (or the forward it inherits) calls ``self.loss_function(..., labels=None, ...)``;
    False where its source cannot be read."""
    forward = getattr(cls, "forward", None)
    if forward is None:
        return False
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(forward))))
    except (OSError, TypeError, SyntaxError):
        return False
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "loss_function":
            for kw in call.keywords:
                if kw.arg == "labels" and isinstance(kw.value, ast.Constant) and kw.value.value is None:
                    return True
    return False
