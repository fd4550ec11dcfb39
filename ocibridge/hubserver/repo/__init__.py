"""The Hub repository as a domain, with no HTTP in it: its refs record, ref names and rules, history,
files, commits and edits. ``reading/`` and ``writeroutes/`` are thin HTTP over it (docs/architecture-serve.md)."""
