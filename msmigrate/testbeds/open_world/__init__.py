"""Tiny, complete, offline sources for any transformers image-text-to-text family, derived from the family's own
classes (config, processor, image processor) with no per-family recipe: the open-world sweep
(``benchmarks/bench_open_world_sweep.py``) builds one per entry of ``MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES``
and runs the rules policy on it. ``shrink`` makes the config small, ``tokens`` finds the family's special tokens,
``chat_style`` picks the prompt format, ``build`` writes and verifies the folder."""
