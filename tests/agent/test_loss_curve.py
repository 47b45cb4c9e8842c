"""The report's loss curve: every launch at the iterations it really ran (G5's load run resumes after G4's last
iteration, so it is drawn at 7–8 for 6-iteration gates, not at 1–2), and no line hides another completely."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402

from msmigrate.agent.report import _losses, draw_losses, plot_losses  # noqa: E402

G4 = [2.0, 1.9, 1.8, 1.7, 1.6, 1.5]


def _gates(with_iterations: bool) -> dict:
    def ev(label, losses, its, last):
        metrics = {"losses": losses, "last_iteration": last}
        if with_iterations:
            metrics["loss_iterations"] = its
        return {"label": label, "metrics": metrics}

    return {"G4": {"evidence": [ev("single-process", G4, list(range(1, 7)), 6)]},
            "G5": {"evidence": [ev("repeat-same-seed", G4, list(range(1, 7)), 6), ev("load", [1.45, 1.4], [7, 8], 8)]},
            "G6": {"evidence": [ev("2-ranks", [2.0, 1.85, 1.8, 1.7, 1.65, 1.5], list(range(1, 7)), 6)]}}


def test_each_launch_at_its_real_iterations():
    for with_iterations in (True, False):  # from the logged numbers, or placed to end at last_iteration
        series = _losses(_gates(with_iterations))
        assert series["G5 load"] == ([7, 8], [1.45, 1.4])
        assert series["G4 single-process"][0] == [1, 2, 3, 4, 5, 6]


def test_no_line_hides_another(tmp_path):
    series = _losses(_gates(True))
    lines = draw_losses(Figure().add_subplot(), series)
    assert len(lines) == 4
    looks = {(ln.get_marker(), ln.get_linestyle()) for ln in lines}
    assert len(looks) == 4  # every launch has its own marker + line style
    g4, repeat = lines[0], lines[1]
    assert list(g4.get_ydata()) == list(repeat.get_ydata())  # same seed → same losses …
    assert list(g4.get_xdata()) != list(repeat.get_xdata())  # … drawn a little apart, not on top
    assert repeat.get_markersize() < g4.get_markersize()
    assert plot_losses(series, tmp_path / "loss.png") and (tmp_path / "loss.png").stat().st_size > 0
