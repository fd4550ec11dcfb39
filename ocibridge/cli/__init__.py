"""The ``ocibridge`` command: one module per command group, each parsing flags and calling the API.

:func:`run` is the console script; :func:`main` takes an argument list and returns the exit code.
"""

from ocibridge.cli.entry import main, run

__all__ = ["main", "run"]
