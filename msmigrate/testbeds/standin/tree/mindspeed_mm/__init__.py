# Stand-in of MindSpeed-MM. Like the real package, importing it without NON_MEGATRON=true pulls in the
# Megatron-route patches, which need the `megatron` package (absent on the plugin route).
import os

if os.getenv("NON_MEGATRON", "") != "true":
    import megatron  # noqa: F401  (fails with ModuleNotFoundError: No module named 'megatron')
