"""Helpers that tool code imports: ``from weir_runtime import save_image_artifact``.

Pure Python with no dependencies, so the same file serves the installed package and
the runtime's sandboxed runs (the run harness ships a copy beside itself). Every file a
run writes to its working directory becomes an artifact; these helpers only write
files there under a safe name.
"""

import io
import os

__all__ = ["save_image_artifact"]

_DEFAULT_EXTENSION = ".png"


def _safe_name(filename):
    name = str(filename)
    if (
        not name
        or name in (".", "..")
        or "/" in name
        or "\\" in name
        or "\x00" in name
        or len(name) > 200
    ):
        raise ValueError(f"artifact filename must be a plain file name, not {filename!r}")
    if not os.path.splitext(name)[1]:
        name += _DEFAULT_EXTENSION
    return name


def save_image_artifact(figure, filename="figure.png", **options):
    """Saves ``figure`` as an artifact named ``filename`` in the run's directory.

    ``figure`` may be a matplotlib figure (or the ``matplotlib.pyplot`` module, meaning
    the current figure), a PIL image, a plotly figure, or raw ``bytes``. Options are
    passed to the underlying save call (e.g. ``dpi=150``). Returns the file name.
    """
    name = _safe_name(filename)
    path = os.path.join(os.getcwd(), name)
    extension = os.path.splitext(name)[1].lower().lstrip(".")
    if isinstance(figure, (bytes, bytearray, memoryview)):
        with open(path, "wb") as handle:
            handle.write(bytes(figure))
    elif isinstance(figure, io.BytesIO):
        with open(path, "wb") as handle:
            handle.write(figure.getvalue())
    elif hasattr(figure, "savefig"):  # matplotlib Figure, or pyplot itself
        figure.savefig(path, format=extension or None, **options)
    elif hasattr(figure, "write_image") or hasattr(figure, "write_html"):  # plotly
        if extension in ("html", "htm"):
            figure.write_html(path, **options)
        else:
            figure.write_image(path, **options)
    elif hasattr(figure, "save") and hasattr(figure, "mode"):  # PIL image
        figure.save(path, **options)
    else:
        raise TypeError(
            "save_image_artifact expects a matplotlib figure, a PIL image, "
            f"a plotly figure or bytes, not {type(figure).__name__}"
        )
    return name
