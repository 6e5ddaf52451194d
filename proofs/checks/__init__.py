"""Check modules.  Every module in this package is imported by :func:`load_all`,
and registers its checks with :func:`proofs.registry.check` at import time."""
import importlib
import pkgutil


def load_all() -> None:
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")
