"""``python -m hango`` is the ``hango`` command."""

from hango.processes.cli import main

main()
