import torch

_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "fp64": torch.float64,
           "int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64}


def get_dtype(name):
    if name is None:
        return None
    if name not in _DTYPES:
        raise ValueError(f"Unsupported dtype: {name}")
    return _DTYPES[name]
