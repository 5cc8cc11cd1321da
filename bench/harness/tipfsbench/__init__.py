"""tipfs benchmark harness modules (see run.py and bench/README.md)."""
