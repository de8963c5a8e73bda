"""The `martlet` command: `python -m martlet.cli` or the installed `martlet`."""
