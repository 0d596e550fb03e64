"""``import mori.allocator``: mori-symm's torch backend, "MORI", under the
name the project has always documented.  This module is all mori-symm
installs in the ``mori`` namespace (no ``mori/__init__.py``: ``mori`` is a
PEP 420 namespace that AMD's mori package may own), and it re-exports
``mori_symm``, whose import registers the backend::

    import torch.distributed._symmetric_memory as symm_mem
    import mori.allocator
    symm_mem.set_backend("MORI")

Where AMD's mori ships its own ``mori/allocator/`` package, that package is
what ``import mori.allocator`` finds (a package wins over a module of the
same name); ``import mori_symm`` always names this backend.
"""

from mori_symm import *  # noqa: F401,F403  (registers "MORI")
from mori_symm import __all__, __version__, version_info  # noqa: F401
