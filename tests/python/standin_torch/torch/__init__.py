"""A stand-in for torch, for tests/python/pkgtool.py in CI (no torch there):
as much as mori_symm's import touches before its extension loads."""
import types

version = types.SimpleNamespace(hip=None, cuda=None)
__version__ = "0.0.0+standin"
