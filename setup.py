"""The compiled parts of Samsa (pyproject.toml has everything else): the Produce validator's
record walker and the log cleaner's offset map and record filter. `optional=True`: without a C
compiler the install still succeeds and both run in Python (samsa/protocol/record_walk.py,
samsa/storage/offset_map.py), which the broker logs at start-up."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("samsa.protocol._recwalk", ["samsa/protocol/_recwalk.c"], optional=True, extra_compile_args=["-O3"]),
    Extension("samsa.storage._cleaner", ["samsa/storage/_cleaner.c"], optional=True,
              extra_compile_args=["-O3", "-Wall", "-Wextra", "-Wno-unused-parameter"]),
])
