class ConfigValidationError(Exception):
    """Configuration validation error"""
