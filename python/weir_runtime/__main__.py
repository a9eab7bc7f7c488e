"""``python -m weir_runtime``: the same server as the ``weir-pyruntime`` command."""

from weir_runtime import main

main()
