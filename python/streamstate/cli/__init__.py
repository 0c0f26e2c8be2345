"""The ``streamstate`` command (``python -m streamstate``): the workbench around the library.

Modules: ``main`` (the parser and ``main()``, the console script), ``kafka`` (``streamstate
kafka``: the local broker), ``restore`` (``streamstate restore`` and ``query``), ``run``
(``streamstate run APP.py``), ``demo`` (the record path end to end) and ``tour`` (what
``streamstate demo`` shows). The library never imports this package.
"""

from __future__ import annotations

from streamstate.cli.main import main

__all__ = ["main"]
