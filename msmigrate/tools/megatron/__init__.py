"""The Megatron backend route (pretrain_vlm.py): the checks its gates and phases run, and (``probes/``) the scripts
those checks run inside the target runtime (standalone files, located by path: they import nothing from msmigrate)."""

from pathlib import Path

PROBES_DIR = Path(__file__).resolve().parent / "probes"
