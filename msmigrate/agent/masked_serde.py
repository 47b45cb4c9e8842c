"""The checkpoint serializer: LangGraph's own (``JsonPlusSerializer``) with every registered secret masked by value.

A checkpoint holds the whole state — messages, tool outputs, gate evidence — so a secret that reached any of them
would sit in ``checkpoints.sqlite``. Each blob is serialised as usual; only when it contains a registered secret is
the object masked (``secret_mask.mask_obj``) and serialised again, so the common case costs one byte search."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from msmigrate.core.secret_mask import mask_obj, registered


class MaskingSerializer(JsonPlusSerializer):
    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        kind, data = super().dumps_typed(obj)
        if any(s.encode("utf-8") in data for s in registered()):
            kind, data = super().dumps_typed(mask_obj(obj))
        return kind, data
