"""How one image becomes tokens for a source model, measured by its own processor in the target runtime.

The core (``derive_media_expansion``) runs ``probes/media_expansion.py`` on the source folder and its real samples
and returns a ``MediaExpansion``. The data phase builds the generated mm_plugin from it, the plan names the
processor outputs that reach the forward (and those that do not, with why), and parity checks can compare a
migrated pipeline's tokens with ``per_image``. Nothing in here knows a model family.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.tools.runtime import run_probe, save_probe_output

PROBE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
TEXT_KEYS = ("input_ids", "attention_mask", "labels")


@dataclass
class ImageExpansion:
    """One probed image: what the processor put in place of the placeholder."""

    image: str  # sample path, or how a probe copy was made from it
    size: list[int]  # [width, height]
    count: int  # media tokens (the id the vision features are scattered into)
    length: int  # all ids of the expansion (media tokens + start/end/break tokens + text the placeholder carried)
    text: str  # the expansion decoded (what the generated plugin writes for a fixed expansion)
    prefix: list[str] = field(default_factory=list)
    suffix: list[str] = field(default_factory=list)
    break_tokens: list[str] = field(default_factory=list)
    num_multimodal_tokens: int | None = None  # the processor's own _get_num_multimodal_tokens, where it has one


@dataclass
class MediaExpansion:
    ok: bool
    error: str | None = None
    processor_class: str = ""
    loaded_via: str = ""
    placeholder: str = ""  # what the source chat template renders for one image item
    placeholder_source: str = ""
    media_token: str = ""
    media_token_id: int | None = None
    media_token_source: str = ""
    kind: str = ""  # "fixed": every probed image expands identically; "per_image": the expansion depends on it
    pre: int = 0  # ids the processor adds before / after one expansion (bos, a trailing newline …)
    post: int = 0
    per_image: list[ImageExpansion] = field(default_factory=list)
    keys_with_image: list[str] = field(default_factory=list)
    keys_text_only: list[str] = field(default_factory=list)
    image_processor_keys: list[str] = field(default_factory=list)
    model_input_names: list[str] = field(default_factory=list)
    token_type_ids: str | None = None  # what the processor marks with it: media | suffix | zeros | other
    processor_kwargs: dict[str, Any] = field(default_factory=dict)
    # ids the processor writes once between the media and the text after it, not per image: {ids, text, where}
    # with where = "first" | "last" (PaliGemma: <bos> after the last image run, before the prompt)
    after_media_once: dict[str, Any] | None = None
    # text the processor writes between the media and a word right after it where the text has no separator: {ids, text}
    separator_after_media: dict[str, Any] | None = None
    # each sample with an image as the source renders it in full: {sample, length, media} (or {sample, error})
    sample_lengths: list[dict[str, Any]] = field(default_factory=list)
    saved: str | None = None

    @property
    def fixed_text(self) -> str | None:
        return self.per_image[0].text if self.ok and self.kind == "fixed" and self.per_image else None

    @property
    def tokens_written(self) -> list[str]:
        """The media-related tokens the source processor actually wrote for the probed images (the media token,
        and each expansion's start / end / break tokens), measured — not the tokenizer's name-matched list."""
        if not self.ok:
            return []
        out = [self.media_token] if self.media_token else []
        for image in self.per_image:
            out += [*image.prefix, *image.suffix, *image.break_tokens]
        return [t for t in dict.fromkeys(out) if t and t.strip()]

    @property
    def counts(self) -> list[int]:
        return [p.count for p in self.per_image]

    def describe(self) -> str:
        if not self.ok:
            return f"media expansion unknown: {self.error}"
        first = self.per_image[0]
        # escaped: a suffix newline printed raw broke the plan's reason line in two
        around = ("".join(first.prefix) + f"[{self.media_token} x N]" + "".join(first.suffix)).encode(
            "unicode_escape").decode("ascii")
        breaks = f", rows broken by {first.break_tokens}" if any(p.break_tokens for p in self.per_image) else ""
        if self.after_media_once:
            breaks += f", then {self.after_media_once['text']!r} once after the {self.after_media_once['where']} image"
        if self.separator_after_media:
            breaks += f", {self.separator_after_media['text']!r} before a word right after an image"
        if self.kind == "fixed":
            how = "the same for every probed image"
        elif len(set(self.counts)) == 1:
            # same media-token count, different layout (row breaks, slice grid): the text is per image, N is not
            how = (f"= {self.counts[0]} for every probed image, but the expansion's layout depends on the image "
                   "(ids: " + ", ".join(f"{p.size[0]}x{p.size[1]} -> {p.length}" for p in self.per_image) + ")")
        else:
            how = "depends on the image: " + ", ".join(f"{p.size[0]}x{p.size[1]} -> {p.count}" for p in self.per_image)
        return (f"{self.processor_class}: {self.placeholder!r} -> {around}{breaks}; N {how} "
                f"(media token from {self.media_token_source})")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "MediaExpansion":
        data = dict(data)
        data["per_image"] = [ImageExpansion(**p) for p in data.get("per_image") or []]
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def _image(raw: dict[str, Any]) -> ImageExpansion:
    return ImageExpansion(image=raw["image"], size=raw["size"], count=raw.get("count", 0), length=len(raw["ids"]),
                          text=raw["text"], prefix=raw.get("prefix") or [], suffix=raw.get("suffix") or [],
                          break_tokens=raw.get("break_tokens") or [],
                          num_multimodal_tokens=raw.get("num_multimodal_tokens"))


def error_line(stderr: str) -> str | None:
    """The last line of stderr that reports an exception (``ValueError: …``), not a library's deprecation warning
    printed after it (a remote-code processor's ``[transformers] … is deprecated`` was shown as the probe's cause)."""
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    found = [ln for ln in lines if re.match(r"^[\w.]*(Error|Exception|Exit|Interrupt)\b.*", ln)]
    return found[-1] if found else None


def derive_media_expansion(runtime_python: str, source: Path, data: Path, *, run_dir: Path | None = None,
                           trust_remote_code: bool = False, samples: int = 2,
                           timeout: float = 300.0) -> MediaExpansion:
    """Run the probe; an expected failure (no processor, no image in the samples …) is ``ok=False`` + ``error``."""
    args = ["--model", str(source), "--data", str(data), "--samples", str(samples)]
    if trust_remote_code:
        args.append("--trust-remote-code")
    res = run_probe(runtime_python, "media_expansion", args, env_extra=PROBE_ENV, timeout=timeout)
    raw, saved = save_probe_output(run_dir, "media_expansion", res)
    if not res.ok:
        tail = error_line(res.data.get("stderr_tail") or "") if res.data else None
        return MediaExpansion(ok=False, error=res.error + (f" ({tail})" if tail and tail not in res.error else ""),
                              saved=saved, loaded_via=raw.get("loaded_via", ""))
    pre, post = (raw.get("pre_post") or [[0, 0]])[0]
    return MediaExpansion(
        ok=True, processor_class=raw["processor_class"], loaded_via=raw["loaded_via"], placeholder=raw["placeholder"],
        placeholder_source=raw["placeholder_source"], media_token=raw["media_token"],
        media_token_id=raw["media_token_id"], media_token_source=raw["media_token_source"], kind=raw["kind"],
        pre=pre, post=post, per_image=[_image(p) for p in raw["per_image"]],
        keys_with_image=raw["keys_with_image"], keys_text_only=raw["keys_text_only"],
        image_processor_keys=raw["image_processor_keys"], model_input_names=raw["model_input_names"],
        token_type_ids=raw.get("token_type_ids"), processor_kwargs=raw.get("processor_kwargs") or {},
        after_media_once=raw.get("after_media_once"), separator_after_media=raw.get("separator_after_media"),
        sample_lengths=raw.get("sample_lengths") or [], saved=saved)
