"""Type stubs of the Rust extension module (pyruntime/src/lib.rs)."""

__version__: str

def serve(argv: list[str] | None = None) -> None:
    """Run the runtime's HTTP server with these command-line arguments (program name
    first); returns after Ctrl-C or SIGTERM. Raises ValueError for bad arguments and
    RuntimeError when the server cannot start."""

def zygote() -> int:
    """Run a workspace zygote of the runtime in this process (the server starts these
    itself; not for direct use). Returns the exit status."""
