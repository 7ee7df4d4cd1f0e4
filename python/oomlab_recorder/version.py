"""version.py: the package version, written in trace headers."""
__version__ = "0.1.0"
