"""Which processor outputs reach the forward, and how — from the measured media expansion and the forward signature.

- an output the image processor makes and the forward takes goes through the mm_plugin's ``get_mm_inputs``;
- ``token_type_ids`` is made by the processor's text pass; where the probe saw what it marks (the media tokens, or
  the suffix a prefix-LM trains on), the generated collator computes the same from the collated batch;
- an output the generic collator makes itself (``mm_token_type_ids``: 1 on the media tokens) and the forward takes
  reaches it from the collator, so it is not dropped;
- every other output is dropped, and the plan says why;
- the generic collator's own extras (``mm_token_type_ids``) are dropped when the forward does not take them.

Also: the architecture kinds a plugin-route migration of a decoder-only VLM does not cover (encoder-decoder, early
fusion), recognised from the source config.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from msmigrate.tools.media_expansion import TEXT_KEYS, MediaExpansion

GENERIC_COLLATOR_EXTRAS = ("mm_token_type_ids",)  # keys the generic collator adds beyond text + media
DERIVABLE = {"media": "1 on the media tokens (bidirectional attention inside each image)",
             "suffix": "1 on the trained suffix (labels), 0 on the prefix: the prefix-LM mask"}


@dataclass
class DataContract:
    mm_input_keys: list[str] = field(default_factory=list)  # image-processor outputs the mm_plugin returns
    collator_derives: dict[str, str] = field(default_factory=dict)  # key -> rule the collator computes it by
    collator_drops: list[str] = field(default_factory=list)  # generic-collator keys the forward does not take
    collator_makes: list[str] = field(default_factory=list)  # processor outputs the generic collator makes itself
    dropped: list[dict[str, str]] = field(default_factory=list)  # {key, reason}

    @property
    def needs_collator(self) -> bool:
        return bool(self.collator_derives or self.collator_drops)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def derive_contract(exp: MediaExpansion, forward_params: set[str] | None) -> DataContract:
    takes = (lambda k: True) if forward_params is None else (lambda k: k in forward_params)
    out = DataContract()
    produced = [k for k in dict.fromkeys(exp.image_processor_keys + exp.keys_with_image) if k not in TEXT_KEYS]
    if exp.token_type_ids in DERIVABLE and "token_type_ids" not in produced:
        produced.append("token_type_ids")  # returned only with a suffix (transformers 4.x PaliGemma), still the rule
    for key in produced:
        if not takes(key):
            out.dropped.append({"key": key, "reason": "the forward has no such parameter"})
        elif key in exp.image_processor_keys:
            out.mm_input_keys.append(key)
        elif key in GENERIC_COLLATOR_EXTRAS:
            out.collator_makes.append(key)
        elif key == "token_type_ids" and exp.token_type_ids in DERIVABLE:
            out.collator_derives[key] = exp.token_type_ids
        elif key == "token_type_ids":
            out.dropped.append({"key": key, "reason": f"the processor's token_type_ids mark {exp.token_type_ids!r}; "
                                                      "the forward's default (none) is used"})
        else:
            out.dropped.append({"key": key, "reason": "made by the processor's text pass, with no rule to compute "
                                                      "it from a collated batch"})
    if "labels" in exp.keys_with_image:
        out.dropped.append({"key": "labels", "reason": "the framework builds labels itself (prompt masked)"})
    if forward_params is not None:
        out.collator_drops = [k for k in GENERIC_COLLATOR_EXTRAS if k not in forward_params]
    return out


def architecture_kind(cfg: dict[str, Any]) -> tuple[str, str]:
    """('decoder' | 'encoder-decoder' | 'early-fusion', evidence) from config.json."""
    subs = {k: v for k, v in cfg.items() if k.endswith("_config") and isinstance(v, dict)}
    for where, c in [("config.json", cfg), *((f"config.json:{k}", v) for k, v in subs.items())]:
        if c.get("is_encoder_decoder") or ("encoder_layers" in c and "decoder_layers" in c):
            return "encoder-decoder", f"{where} is_encoder_decoder / encoder_layers + decoder_layers"
    if "vocabulary_map" in cfg or ("vq_config" in cfg and "vision_config" not in cfg):
        return "early-fusion", ("config.json has " + ("vocabulary_map (image codes are text-vocabulary ids)"
                                                      if "vocabulary_map" in cfg else
                                                      "a vq_config and no vision encoder"))
    return "decoder", "decoder-only language model with a vision encoder"
