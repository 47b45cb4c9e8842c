"""The rules policy's phases on the FSDP2 plugin route (``model``, ``data``, ``config``) and their helpers."""
