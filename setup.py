"""The compiled parts (Cython) beside the Python ones: pyproject.toml says everything else
(a probe for libzstd's header cannot be written in TOML). Without Cython or a C compiler
the package installs without the compiled parts and the Python paths run
(``changestream.native.compiled`` says which is used).
"""

import os

from setuptools import Extension, setup

try:
    from Cython.Build import cythonize
except ImportError:  # the Python paths only
    extensions = []
else:
    names = ["changestream.native.json_text", "changestream.native.binlog_values",
             "changestream.native.framing", "changestream.snapshot._text_rows",
             "changestream.parallel._segment_rows", "changestream.parallel._plain_walk",
             "changestream.sinks.spark._arrow_walk",
             "changestream.sinks.spark._snapshot_frames",
             "changestream.sinks.spark._row_hash", "changestream.sinks.spark._key_events"]
    libraries: dict[str, list[str]] = {}
    # libzstd's header comes with Debian's libzstd-dev (the install script installs it).
    if any(os.path.exists(os.path.join(d, "zstd.h")) for d in ("/usr/include",
                                                                 "/usr/local/include")):
        names.append("changestream.native.zstd_frames")
        libraries["changestream.native.zstd_frames"] = ["zstd"]
    extensions = cythonize(
        [Extension(name, [name.replace(".", "/") + ".pyx"], extra_compile_args=["-O2"],
                   libraries=libraries.get(name, []))
         for name in names],
        language_level=3, quiet=True)

setup(ext_modules=extensions)
