import enum


class ModelType(enum.Enum):
    encoder_or_decoder = 1
