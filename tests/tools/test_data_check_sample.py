"""The decoded sample check_data/G2 return: trained span marked, counts, expanded media runs collapsed."""

import importlib.util
from pathlib import Path

import msmigrate

spec = importlib.util.spec_from_file_location(
    "data_check_probe", Path(msmigrate.__file__).parent / "tools" / "probes" / "data_check.py")
probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(probe)

VOCAB = {1: "<user>", 2: "hi", 3: "<img>", 4: "<bot>", 5: "yes", 6: "<eos>", 0: "<pad>"}


def decode(ids):
    return "".join(VOCAB[i] for i in ids)


def test_sample_view_marks_trained_span_counts_and_collapses_media():
    ids = [1, 3, 3, 3, 3, 3, 3, 2, 4, 5, 6, 0, 0]
    labels = [-100] * 9 + [5, 6, -100, -100]
    mask = [1] * 11 + [0, 0]
    view = probe.sample_view(decode, ids, labels, mask)
    assert view["decoded"] == "<user><img>×6hi<bot>⟦yes<eos>⟧"
    assert (view["tokens"], view["trained_tokens"], view["trained_spans"]) == (11, 2, 1)
    assert view["repeated_tokens"] == {"<img>": 6} and view["labels_match_inputs"]


def test_sample_view_flags_labels_that_are_not_the_inputs_and_no_trained_tokens():
    view = probe.sample_view(decode, [1, 2, 4, 5], [-100, -100, -100, 6])
    assert not view["labels_match_inputs"] and view["trained_tokens"] == 1
    assert probe.sample_view(decode, [1, 2], [-100, -100])["trained_tokens"] == 0


def test_the_saved_batch_keeps_list_valued_keys_a_weights_only_load_reads(tmp_path):
    """G2's forward on the collated batch gets the list-valued keys too (per-image tensors, bounds): they used to
    be dropped when the batch was saved, so a plugin's image path never ran in any gate."""
    import torch
    from PIL import Image

    batch = {"input_ids": torch.ones(1, 3, dtype=torch.long), "pixel_values": [[torch.zeros(3, 4, 4)]],
             "image_bound": [torch.tensor([[1, 2]])], "tgt_sizes": [[2, 2]], "image": [Image.new("RGB", (2, 2))]}
    kept = {k: v for k, v in batch.items() if probe.loadable(v)}
    assert sorted(kept) == ["image_bound", "input_ids", "pixel_values", "tgt_sizes"]
    torch.save(kept, tmp_path / "batch.pt")
    back = torch.load(tmp_path / "batch.pt", weights_only=True)
    assert isinstance(back["pixel_values"][0][0], torch.Tensor) and back["tgt_sizes"] == [[2, 2]]


class _Tok:
    """A tokenizer that, like the real ones, cannot decode an id outside its vocabulary (negative ids overflow)."""

    def __len__(self):
        return len(VOCAB)

    def decode(self, ids, skip_special_tokens=False):
        if any(i < 0 or i >= len(VOCAB) for i in ids):
            raise OverflowError("out of range integral type conversion attempted")
        return decode(ids)


def test_ids_the_tokenizer_has_no_token_for_are_shown_not_a_crash():
    # a family that marks a sample's images with negative ids (-1 for the first image, as its own processor writes
    # them) must get a readable G2 sample, not an OverflowError from the tokenizer
    view = probe.sample_view(lambda ids: probe.decode_any(_Tok(), ids), [1] + [-1] * 6 + [2, 4, 5, 6],
                             [-100] * 9 + [5, 6])
    assert view["decoded"] == "<user>⟨id -1⟩×6hi<bot>⟦yes<eos>⟧"
    assert view["repeated_tokens"] == {"⟨id -1⟩": 6}
