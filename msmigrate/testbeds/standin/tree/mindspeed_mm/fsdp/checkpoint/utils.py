"""Checkpoint helpers of the stand-in trainer (contract: the real ``fsdp/checkpoint/utils.py``).

``retie_embeddings``: the real trainer calls it at the end of ``get_model``, after the meta-device materialisation,
because ``to_empty_if_needed`` gives every parameter its own new storage and so splits a tied input/output embedding
pair. It ties them again (one ``nn.Parameter`` shared, so their gradients accumulate in one place) only when the
model's top-level config AND its text config both ask for it; a flag absent at one level counts as asking.
"""
import torch


def _wants_tie(config) -> bool:
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    if not (hasattr(config, "tie_word_embeddings") or hasattr(text, "tie_word_embeddings")):
        return False
    return bool(getattr(config, "tie_word_embeddings", True) and getattr(text, "tie_word_embeddings", True))


def retie_embeddings(model: torch.nn.Module) -> None:
    config = getattr(model, "config", None)
    if config is None or not _wants_tie(config):
        return
    # A model whose config asks for the tie but that cannot give its embeddings (a custom nn.Module keeping an HF
    # config, without get_input_embeddings) stops the real trainer here with this RuntimeError; so does the stand-in.
    try:
        inp, out = model.get_input_embeddings(), model.get_output_embeddings()
        if inp is not None and out is not None:
            out._parameters["weight"] = inp._parameters["weight"]
    except (AttributeError, NotImplementedError, KeyError) as e:
        raise RuntimeError("Failed to tie input/output embeddings after HF load") from e
