"""``python -m bench``: see :mod:`bench.run`."""
from bench.run import main

main()
