"""Plugin-style FSDP2 backend (stand-in)."""
