"""G2: inputs the source processor makes and the forward names must reach the batch. A forward with ``**kwargs``
runs to a finite loss on a batch whose collator renamed ``attention_mask`` (the renamed key is swallowed, the mask
defaults to None), so the finite loss alone did not show it (fault data-collator-key-renamed was missed)."""

from __future__ import annotations

from msmigrate.agent.routes.fsdp2.gates.data_gate import missing_batch_keys

PLAN = {"collator": "qwen3vl",
        "media_expansion": {"keys_with_image": ["attention_mask", "image_grid_thw", "input_ids", "mm_token_type_ids",
                                                "pixel_values"]},
        "data_contract": {"mm_input_keys": ["pixel_values", "image_grid_thw"]}}
PARAMS = ["input_ids", "attention_mask", "labels", "pixel_values", "image_grid_thw", "mm_token_type_ids"]


def keys(*names):
    return {n: {"shape": [1, 4], "dtype": "int64"} for n in names}


def test_a_renamed_mask_is_reported_with_the_key_the_forward_does_not_read():
    found = missing_batch_keys(PLAN, keys("input_ids", "attn_mask", "labels", "pixel_values", "image_grid_thw"),
                               PARAMS)
    assert len(found) == 1 and "lacks attention_mask" in found[0] and "attn_mask" in found[0]
    assert "qwen3vl" in found[0]
    # with the target's inventory, the collator is named by the file that registers it: the classify node's
    # gate-remedy rule places the cause there (data), whatever case the output matches
    inventory = {"collators": [{"id": "qwen3vl", "file": "mindspeed_mm/fsdp/data/dataloader/data_collator.py"}]}
    placed = missing_batch_keys(PLAN, keys("input_ids", "attn_mask", "labels", "pixel_values", "image_grid_thw"),
                                PARAMS, inventory)
    assert "the collator (qwen3vl (defined in mindspeed_mm/fsdp/data/dataloader/data_collator.py))" in placed[0]
    from msmigrate.knowledge.failure_context import Artifacts, gate_remedy_owner

    arts = Artifacts(data=("mindspeed_mm/fsdp/data/dataloader/data_collator.py",))
    assert gate_remedy_owner(placed[0], arts).owner == "data"


def test_a_complete_batch_and_keys_the_contract_drops_say_nothing():
    full = keys("input_ids", "attention_mask", "labels", "pixel_values", "image_grid_thw")
    assert missing_batch_keys(PLAN, full, PARAMS) == []  # mm_token_type_ids: the contract does not route it
    assert missing_batch_keys(PLAN, full, []) == []  # no signature read: nothing to compare
    assert missing_batch_keys({}, keys("input_ids"), PARAMS) == []  # no processor facts in the plan
    missing_media = missing_batch_keys(PLAN, keys("input_ids", "attention_mask", "labels"), PARAMS)
    assert "pixel_values, image_grid_thw" in missing_media[0]
