"""mori-symm for torch: ``import mori.allocator`` registers the "MORI"
SymmetricMemory backend (select it with
``torch.distributed._symmetric_memory.set_backend("MORI")``).

The package itself imports nothing heavy; torch and the extension load with
``mori.allocator``.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
