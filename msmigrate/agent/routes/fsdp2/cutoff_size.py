"""``cutoff_len`` sized by the source's own sample lengths: the framework's dataset cuts every sequence to
``data.dataset_param.basic_parameters.cutoff_len``, and a cut through an image's expansion leaves fewer media tokens
than the vision tower makes features (G2's cutoff check fails it with the numbers). A similar example's value was
chosen for its own model's expansion (a few hundred tokens may be plenty there and cut a source that expands one image
to 576 or thousands of tokens), so the draft raises it to the longest sample the source's processor renders in full
(the plan's media expansion measured them) and never lowers it (a longer cut is the example author's choice)."""

from __future__ import annotations

from typing import Any

CUTOFF_PATH = "data.dataset_param.basic_parameters.cutoff_len"


def longest_sample(plan: dict[str, Any]) -> dict[str, Any] | None:
    """The longest sample with media as the source's processor renders it untruncated (``{sample, length, media}``),
    from the plan's measured media expansion; None when nothing was measured."""
    rows = [r for r in (plan.get("media_expansion") or {}).get("sample_lengths") or []
            if isinstance(r.get("length"), int) and r.get("media")]
    return max(rows, key=lambda r: r["length"]) if rows else None


def sized_cutoff(plan: dict[str, Any], current: Any) -> tuple[int | None, str | None]:
    """(the cutoff_len the draft writes, why it differs from ``current``); (None, None) to keep ``current``: no
    measured length, no numeric value to size (the target's own default applies), or one already long enough."""
    longest = longest_sample(plan)
    if longest is None or isinstance(current, bool) or not isinstance(current, int) or current >= longest["length"]:
        return None, None
    rows = (plan.get("media_expansion") or {}).get("sample_lengths") or []
    return longest["length"], (
        f"{CUTOFF_PATH} raised from the similar example's {current} to {longest['length']}: the source's processor "
        f"renders sample {longest['sample']} untruncated as {longest['length']} tokens, {longest['media']} of them "
        f"media tokens (longest of {len(rows)} measured samples with media); {current} would cut its media")

