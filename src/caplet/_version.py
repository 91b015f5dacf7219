"""The version of caplet (read by the build backend too)."""

__version__ = "0.1.0"
