"""agentstack-lab: recursive LLM agents at home in Jupyter.

The package root stays tiny: nothing heavy is imported here, and the IPython
extension hooks load the notebook layer only when ``%load_ext`` asks for it.
``agentstack_lab.workspace()`` (the kernel's shared workspace, see :mod:`agentstack_lab.workspace`)
imports its module on first access.
"""

from agentstack_lab._version import __version__

__all__ = ["__version__", "load_ipython_extension", "unload_ipython_extension"]


def __getattr__(name: str) -> object:
    """``agentstack_lab.workspace`` on first access: the module, callable (``agentstack_lab.workspace()``)."""
    if name == "workspace":
        import importlib

        return importlib.import_module("agentstack_lab.workspace")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The two hooks below are the IPython extension entry point: IPython looks them up on the package
# named in ``%load_ext agentstack_lab``, so they must live here. They import the notebook layer
# inside the function, only when IPython calls them: the root imports nothing at import time, and
# the notebook layer never imports the root back, so this upward edge closes no import cycle.
def load_ipython_extension(ipython):  # pragma: no cover - exercised in kernel tests
    """Register the ``%agent`` and ``%memory`` magics (called by ``%load_ext``)."""
    from agentstack_lab.notebook.magics import load_ipython_extension as _load

    _load(ipython)


def unload_ipython_extension(ipython):  # pragma: no cover - exercised in kernel tests
    """Nothing to undo beyond what IPython does itself."""
    from agentstack_lab.notebook.magics import unload_ipython_extension as _unload

    _unload(ipython)
