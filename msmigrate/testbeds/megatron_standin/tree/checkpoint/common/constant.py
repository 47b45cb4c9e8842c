DIGIT_FMT = r'(\d+)'
MEGATRON_CKPT_NAME = "model_optim_rng.pt"
LATEST_TXT = "latest_checkpointed_iteration.txt"
IMAGE_ENCODER = "image_encoder"
TEXT_DECODER = "text_decoder"
