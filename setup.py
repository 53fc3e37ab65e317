"""Builds the compiled core (stream_ctx/core/compiled.pyx) when a C++ compiler is at hand; without
one the install goes on and stream-ctx runs its Python core (docs/development/compiled-core.md)."""

from Cython.Build import cythonize
from setuptools import Extension, setup

compiled = Extension(
    "stream_ctx.core.compiled",
    ["stream_ctx/core/compiled.pyx"],
    language="c++",
    extra_compile_args=["-O2"],
    optional=True,
)

setup(
    ext_modules=cythonize(
        [compiled], compiler_directives={"language_level": "3"}, quiet=True, build_dir="build"
    )
)
