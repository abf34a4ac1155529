"""MkDocs hooks for reading aids (owned by the reader-experience work): kept apart from
course/mkdocs_hooks.py, which handles the GPU record."""
