"""The single place where sparkdl's version is written."""

__version__ = "0.1.0"

#: The name sparkdl is published under (``pip install sparkdl-tf``): PyPI's ``sparkdl`` is another
#: project. The import name stays ``sparkdl``.
__distribution__ = "sparkdl-tf"
