"""The lexical (BM25) owner vote."""

from msmigrate.knowledge.catalog import load_catalog
from msmigrate.knowledge.lexical import owner_vote


def test_a_repeated_line_counts_once():
    # a log prints its error once per rank or retry: the vote must be the same as for the line printed once
    catalog = load_catalog()
    once = "RuntimeError: NPU error: HBM memory exhausted while allocating activation buffer\n" \
           "ValueError: the processor dropped an image token from the prompt"
    repeated = once.splitlines()[0] + "\n" + "\n".join([once.splitlines()[1]] * 8)
    a, b = owner_vote(once, catalog), owner_vote(repeated, catalog)
    assert (a.owner, a.margin, a.candidates) == (b.owner, b.margin, b.candidates)


def test_no_words_no_vote():
    assert owner_vote("  ... \n", load_catalog()) is None
