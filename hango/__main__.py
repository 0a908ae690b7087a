"""``python -m hango`` is the ``hango`` command."""

from hango.cli import main

main()
