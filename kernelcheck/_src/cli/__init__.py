"""The ``kernelcheck`` command line: one module per command, and what they share.

* :mod:`~kernelcheck._src.cli.main`: the parser of every command and
  :func:`~kernelcheck._src.cli.main.main`, which runs one and maps what it
  raises to one line and an exit code;
* one module per command (:mod:`~kernelcheck._src.cli.essay`,
  :mod:`~kernelcheck._src.cli.psd`, :mod:`~kernelcheck._src.cli.kernel`,
  :mod:`~kernelcheck._src.cli.unbiased`, :mod:`~kernelcheck._src.cli.scaling`),
  each with its ``add_parser`` (its options) and its ``run`` (the work);
* :mod:`~kernelcheck._src.cli.parser`: the parser class (one-line errors that
  name the command's help, suggestions for mistyped flags and values) and
  the help formatter;
* :mod:`~kernelcheck._src.cli.arguments`: argument types, checked by
  :mod:`kernelcheck._src.core.validate`, and choices read from the library's
  catalogues;
* :mod:`~kernelcheck._src.cli.options`: the options several commands share
  (``--timeout``, ``--out``, ``--workers`` / ``--scheduler``);
* :mod:`~kernelcheck._src.cli.files`: reading a matrix from a file;
* :mod:`~kernelcheck._src.cli.output`: verdict lines and the one JSON envelope;
* :mod:`~kernelcheck._src.cli.process`: the ``--timeout`` deadline and Ctrl-C
  while NumPy is imported.

Nothing here imports NumPy when the parser is built, so ``kernelcheck --help``
stays cheap; each command imports what it needs when it runs.
"""
