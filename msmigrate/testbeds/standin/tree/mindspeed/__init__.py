"""Minimal stand-in of the MindSpeed `mindspeed` package (only what MindSpeed-MM imports on the FSDP2 route)."""
