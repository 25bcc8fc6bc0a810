"""pybase64 (a C extension SkyRL's inference client imports) as the standard library's base64."""

from base64 import b64decode, b64encode

__all__ = ["b64decode", "b64encode"]
