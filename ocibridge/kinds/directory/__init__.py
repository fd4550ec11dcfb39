"""Plain model directories: read as a source, and written by a pull (the directory target)."""
