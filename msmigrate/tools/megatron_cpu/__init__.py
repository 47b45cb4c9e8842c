"""CPU stand-ins for what torch_npu gives MindSpeed's Megatron route (loaded in the launched process only)."""
