"""Builds the compiled parts (Cython) beside the Python ones; pyproject.toml says the rest.

Without Cython or a C compiler the package installs without them and the Python paths run
(``changestream.snapshot.row_readers`` says which is used).
"""

from setuptools import Extension, setup

try:
    from Cython.Build import cythonize
except ImportError:  # the Python paths only
    extensions = []
else:
    extensions = cythonize(
        [Extension("changestream.snapshot._text_rows",
                   ["changestream/snapshot/_text_rows.pyx"], extra_compile_args=["-O2"])],
        language_level=3, quiet=True)

setup(ext_modules=extensions)
