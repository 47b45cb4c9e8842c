"""The Megatron backend route (pretrain_vlm.py): pure checks the route's config phase needs (in progress)."""
