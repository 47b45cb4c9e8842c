"""The Megatron route (``pretrain_vlm.py``): existing components matched, new ones designed, model/data JSON and a
launch script drafted, each slot's gate proving them."""
