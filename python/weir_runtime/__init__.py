"""weir's Python tool runtime.

``weir-pyruntime`` (or ``python -m weir_runtime``) starts the runtime's HTTP server, which
is written in Rust and shipped here as the extension module ``_weir_runtime``. Tool code
imports the helpers: ``from weir_runtime import save_image_artifact``.
"""

import sys

from ._weir_runtime import __version__, serve
from .helpers import save_image_artifact

__all__ = ["__version__", "main", "save_image_artifact", "serve"]


def main():
    """Console-script entry: serve until Ctrl-C or SIGTERM with this process's arguments."""
    try:
        serve(["weir-pyruntime", *sys.argv[1:]])
    except KeyboardInterrupt:
        pass
