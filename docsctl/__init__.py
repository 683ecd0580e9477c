"""docsctl: documentation search for people and AI assistants."""

__version__ = "0.1.0"
