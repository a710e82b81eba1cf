"""The generated data files the decoders read (``collations.json``): a package so that
``importlib.resources`` finds them wherever changestream is installed."""
