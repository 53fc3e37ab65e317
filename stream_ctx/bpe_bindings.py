"""bpe-openai's Rust tokenizers, loaded without the package's Python wrapper.

Importing `bpe_openai` builds the rank tables of cl100k_base, o200k_base and voyage3_base as
Python dicts (~1.2 s of CPU at every process start); the Rust side ships its own tables and is all
the core counts with. The extension is found in the installed package and registered under its
own name, so a later `import bpe_openai` uses this same module (PyO3 loads a module once).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from types import ModuleType

__all__ = ("bindings",)

_NAME = "bpe_openai._bindings"


def _load() -> ModuleType:
    loaded = sys.modules.get(_NAME)
    if loaded is not None:
        return loaded
    package = importlib.util.find_spec("bpe_openai")  # found, not run: a top-level name
    if package is None or not package.submodule_search_locations:
        raise ImportError("bpe-openai is not installed", name=_NAME)
    loader = (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES)
    for directory in package.submodule_search_locations:
        spec = importlib.machinery.FileFinder(directory, loader).find_spec(_NAME)
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            sys.modules[_NAME] = module
            spec.loader.exec_module(module)
            return module
    raise ImportError(f"no {_NAME} extension in {package.submodule_search_locations}", name=_NAME)


bindings = _load()
"""The extension module: `tokenizer_for_encoding(name)` gives a tokenizer with `count` and
`encode`."""
