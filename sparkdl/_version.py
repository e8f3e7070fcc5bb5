"""The single place where sparkdl's version is written."""

__version__ = "0.1.0"
