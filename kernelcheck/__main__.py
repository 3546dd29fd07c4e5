"""``python -m kernelcheck``: the same command line as the ``kernelcheck`` script."""

from kernelcheck.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
