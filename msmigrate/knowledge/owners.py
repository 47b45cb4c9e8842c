"""Who owns a failure — written down once, used by failure-catalog entries, corpus labels and the LLM prompt.

The owner of a failure is **the phase whose artifact must change to fix it**; ``environment`` when nothing the
migration writes can fix it. A label is decided by the fix, not by where the traceback points: a shape error raised
inside the model's forward because the data loader yielded nothing is owned by ``data``; an out-of-memory error
fixed by a smaller batch or more sharding is owned by ``config``; the same message caused by a library kernel bug
fixed by upgrading the library is owned by ``environment``.
"""

from __future__ import annotations

OWNER_SEMANTICS: dict[str, str] = {
    "model": "the model plugin code: modeling / adapter classes, forward signature and outputs, weight init and "
             "loading, registration, module names other code relies on",
    "data": "the data path: dataset files and media, their format, the chat template / prompt template, the "
            "processor and mm_plugin, the collator, tokenisation and labels",
    "config": "the training YAML and launch script arguments: parallel sizes, batch and sequence sizes, precision, "
              "attention implementation, paths, trust_remote_code, FSDP / recompute / wrap patterns, optimizer "
              "settings",
    "environment": "what no migration artifact controls: installed package versions (torch, torch_npu, CANN, "
                   "transformers, framework), drivers and devices, host memory, network and ports, accelerator "
                   "runtime variables, cluster / multi-node setup",
}
OWNERS: tuple[str, ...] = tuple(OWNER_SEMANTICS)


def owner_semantics_text() -> str:
    """The definition as a bulleted block (prompts and docs render this, so there is one wording)."""
    lines = ["The owner of a failure is the phase whose artifact must change to fix it; `environment` when nothing "
             "the migration writes can fix it. Decide by the fix, not by where the traceback points."]
    lines += [f"- {owner}: {meaning}" for owner, meaning in OWNER_SEMANTICS.items()]
    return "\n".join(lines)
