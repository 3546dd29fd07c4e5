"""The quick essay stays quick: the modules it need not import stay out.

``kernelcheck essay --quick`` has a 3 s budget on a 2-core machine, of which
start-up is a third; ``scipy.stats`` (about 0.3 s of import) is needed by no
check at the quick level.  The run happens in
a fresh interpreter, so what other tests imported does not count.
"""

from __future__ import annotations

import subprocess
import sys


def test_quick_essay_does_not_import_scipy_stats():
    code = (
        "import sys\n"
        "from kernelcheck._src.claims.essay import run_essay\n"
        "run_essay(level='quick')\n"
        "print(sorted(m for m in ('scipy.stats',) if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout[-2000:]
