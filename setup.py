"""The one compiled part of Samsa: the Produce validator's record walker (pyproject.toml has
everything else). `optional=True`: without a C compiler the install still succeeds and the
walker runs in Python (samsa/protocol/record_walk.py), which the broker logs at start-up."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("samsa.protocol._recwalk", ["samsa/protocol/_recwalk.c"], optional=True,
                             extra_compile_args=["-O3"])])
