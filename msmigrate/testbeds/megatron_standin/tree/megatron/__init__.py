"""Stand-in only: the few Megatron-LM names pretrain_vlm.py reaches (the real route gets Megatron-LM installed
separately; it is not part of MindSpeed-MM). Single process or gloo, CPU."""
