"""kernelcheck's unit tests, one folder per subpackage of ``kernelcheck/_src``.

The folders are packages (each has an ``__init__.py``) so that test files in
different folders may share a basename (``tests/kernels/test_bad_input.py``,
``tests/psd/test_bad_input.py``) under pytest's default import mode.
"""
