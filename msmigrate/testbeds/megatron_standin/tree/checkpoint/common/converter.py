"""Every concrete converter class registers itself (``Commandable.subclasses``); the CLI offers one sub-command
per class and one per static method (hf_to_mm, mm_to_hf, resplit)."""
from abc import ABC, abstractmethod


class Commandable:
    subclasses = []

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not any(getattr(v, '__isabstractmethod__', False) for v in cls.__dict__.values()):
            cls.subclasses.append(cls)


class Converter(ABC, Commandable):

    @staticmethod
    @abstractmethod
    def hf_to_mm(cfg):
        pass

    @staticmethod
    @abstractmethod
    def mm_to_hf(cfg):
        pass

    @staticmethod
    @abstractmethod
    def resplit(cfg):
        pass
