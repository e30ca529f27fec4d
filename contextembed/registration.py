"""Registering the model, its config and its processor with transformers' Auto classes, once transformers is used.

`import contextembed` must make `AutoConfig` / `AutoModel` / `AutoProcessor` (and so sentence-transformers) know the
`contextembed` model type, but registering imports transformers and torch, seconds of CPU that `contextembed --help`
should not pay. So `import contextembed` calls `register_when_transformers_loads()`: if transformers is already
imported the classes are registered at once; otherwise a one-shot import hook registers them right after transformers
finishes importing, before any Auto class can be used. If it is one of `contextembed.modeling`'s files that imports
transformers, the classes are registered when no file of that package is still being imported (they are defined in
them). `contextembed.modeling` itself is light: importing it imports neither transformers nor torch.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading

_lock = threading.Lock()
_registered = False
# The files of contextembed.modeling that import transformers (and define the classes registered).
MODELING_FILES = tuple(f"contextembed.modeling.{name}_contextembed" for name in ("configuration", "modeling",
                                                                                  "processing"))
WATCHED = ("transformers", *MODELING_FILES)


def register_auto_classes() -> None:
    """Register `ContextEmbedConfig`, `ContextEmbedModel` and `ContextEmbedProcessor` with the Auto classes
    (idempotent)."""
    global _registered
    with _lock:
        if _registered:
            return
        from transformers import AutoConfig, AutoModel, AutoProcessor

        from contextembed.modeling import ContextEmbedConfig, ContextEmbedModel, ContextEmbedProcessor

        AutoConfig.register(ContextEmbedConfig.model_type, ContextEmbedConfig, exist_ok=True)
        AutoModel.register(ContextEmbedConfig, ContextEmbedModel, exist_ok=True)
        AutoProcessor.register(ContextEmbedConfig, ContextEmbedProcessor, exist_ok=True)
        _registered = True


def register_when_transformers_loads() -> None:
    """Register now if transformers is imported, else as soon as it (or `contextembed.modeling`) finishes importing."""
    if "transformers" in sys.modules and not _initializing("transformers"):
        register_auto_classes()
    elif not any(isinstance(finder, _AfterImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())


def _initializing(name: str) -> bool:
    module = sys.modules.get(name)
    return module is not None and bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loaders of the `WATCHED` modules so that registration follows their import."""

    def find_spec(self, name, path=None, target=None):
        if name not in WATCHED or _registered:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _RegisteringLoader(spec.loader, self)
                return spec
        return None


class _RegisteringLoader(importlib.abc.Loader):
    def __init__(self, loader, finder: _AfterImport):
        self.loader, self.finder = loader, finder

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        others = [name for name in WATCHED if name != module.__name__]
        if "transformers" not in sys.modules or any(_initializing(name) for name in others):
            return  # transformers is not loaded yet, or a file of ours is importing it: register after that one
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        register_auto_classes()

    def __getattr__(self, name):  # is_package, get_code, get_resource_reader, ... of the wrapped loader
        return getattr(self.loader, name)
