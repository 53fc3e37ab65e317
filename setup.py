"""Builds the compiled core (stream_ctx/core/text/compiled.pyx) when a C++ compiler is at hand;
without one the install goes on and stream-ctx runs its Python core
(docs/development/compiled-core.md)."""

import hashlib
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

SOURCE = "stream_ctx/core/text/compiled.pyx"
# The module carries its source's digest: a test fails when an edit was not built.
digest = hashlib.blake2b(Path(SOURCE).read_bytes(), digest_size=16).hexdigest()

compiled = Extension(
    "stream_ctx.core.text.compiled",
    [SOURCE],
    language="c++",
    extra_compile_args=["-O2"],
    define_macros=[("STREAM_CTX_SOURCE_DIGEST", f'"{digest}"')],
    optional=True,
)

setup(
    ext_modules=cythonize(
        [compiled], compiler_directives={"language_level": "3"}, quiet=True, build_dir="build"
    )
)
