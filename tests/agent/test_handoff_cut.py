"""The hand-off record keeps a phase's summary whole within its budget, else cuts it at a sentence or line end with a
marker (blind live run 10's data prompt read "... </img> in the tex")."""

from __future__ import annotations

from msmigrate.agent.handoff import SUMMARY_CHARS, cut_at_boundary, handoff_record


def test_a_summary_within_budget_is_kept_whole():
    text = "Vendored the remote code. Rebuilt inv_freq in to_empty."
    assert cut_at_boundary(text, SUMMARY_CHARS) == text


def test_a_long_summary_is_cut_after_its_last_whole_sentence_and_says_how_much_was_cut():
    first = "Model phase: the plugin vendors the remote code and rebuilds the rotary buffers. " * 14
    tail = "Data phase: the batch must carry pixel_values and the image tokens in the text; one per tile."
    text = first + tail
    cut = cut_at_boundary(text, SUMMARY_CHARS)
    kept, mark = cut.split(" [... ")
    assert kept.endswith("rotary buffers.") and len(kept) <= SUMMARY_CHARS
    assert mark == f"{len(text) - len(kept)} more chars cut]"
    assert "in the tex" not in cut


def test_without_a_sentence_end_it_cuts_at_a_word_end():
    text = "word " * 400
    cut = cut_at_boundary(text, 100)
    assert cut.startswith("word word") and cut.split(" [... ")[0].endswith("word")


def test_the_record_cuts_the_summary_and_the_gate_summaries_at_boundaries():
    summary = "Registered the model. " * 80
    gates = {"G1": {"summary": "built on meta; forward loss 5.5; " * 30}}
    record = handoff_record("model", gates, [], {"summary": summary}, {})
    assert record["summary"].split(" [... ")[0].endswith("Registered the model.")
    assert record["gates_proved"]["G1"].split(" [... ")[0].endswith("loss 5.5;")
