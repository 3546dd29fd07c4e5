"""``python -m kernelcheck``: the same command line as the ``kernelcheck`` script.

:func:`run` is the script's entry point too.  It imports the command line
inside a ``try``, so Ctrl-C during the imports of start-up prints one line
and exits 130, as it does later; only the interpreter's own start-up, before
any kernelcheck code runs, is out of its reach.
"""

import sys


def run() -> int:
    """Import and run :func:`kernelcheck.cli.main`; Ctrl-C while importing exits 130."""
    try:
        from kernelcheck.cli import main
    except KeyboardInterrupt:
        sys.stderr.write("kernelcheck: interrupted\n")
        return 130  # EXIT_INTERRUPTED, not imported: the import is what was interrupted
    return main()


if __name__ == "__main__":
    raise SystemExit(run())
