"""``python -m xpu_release``: the same command line as the ``xpu-release`` script."""

from .cli import main

main()
