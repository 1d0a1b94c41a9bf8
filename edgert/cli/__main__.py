"""`python -m edgert.cli ...` is the `edgert` command."""
from .main import main

main()
