"""Tools for people: the `edgert` command (main.py), the HTML report (report*.py), cross
builds for boards (build.py, targets.py, sources.py) and file prefixes for per-node
measurements (subgraph.py). May import edgert.converter and edgert.runtime; nothing
below imports this package (docs/design.md, "Layout")."""
