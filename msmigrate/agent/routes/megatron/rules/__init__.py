"""The rules policy's phases on the Megatron route (``model``, ``data``, ``config``)."""
