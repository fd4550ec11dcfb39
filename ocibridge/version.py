"""The version, in a module of its own: whatever needs it (a User-Agent) imports nothing else."""

__version__ = "0.1.0"
