"""The generated data files the decoders read (``collations.json``): a package so that
their package's loader (``pkgutil.get_data``) finds them wherever changestream is installed."""
