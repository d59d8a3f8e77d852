"""Builds the optional C kernels; the package metadata is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "factrail.core._speedups",
            ["factrail/core/_speedups.c"],
            optional=True,  # no compiler: the install goes on and the Python kernels are used
            # no fused multiply-add (the kernels' floats are the Python's, bit for bit); an
            # undeclared function (a private API a new CPython hid) fails the build with every
            # compiler, as with GCC 14, so `make test-matrix` sees it on that version
            extra_compile_args=[
                "-O2",
                "-ffp-contract=off",
                "-Werror=implicit-function-declaration",
            ],
        )
    ]
)
