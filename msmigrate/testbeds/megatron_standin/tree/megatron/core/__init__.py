from megatron.core import parallel_state as mpu  # noqa: F401  (the real package exposes parallel_state as mpu)
