__all__ = ["VisionModel"]

from .vision_model import VisionModel
