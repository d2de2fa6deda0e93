"""`hloopt.batch.run` and `hloopt.execute` from a program that holds jax: no process is forked from it.

jax starts threads as soon as it computes, and warns on every `os.fork()` after that ("JAX is
multithreaded, so this will likely lead to a deadlock"): a fork copies the threads' locks but not
the threads. The pool's workers are fresh interpreters, so such a caller, a script with no
``__main__`` guard included, runs its batch with two workers and its executions with two XLA
workers, and no warning.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import sampled

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

#: A user's script, as it would be written: no ``if __name__ == "__main__"`` guard.
SCRIPT = """\
import json, sys
import numpy as np
import jax
import jax.numpy as jnp
import hloopt
import hloopt.batch

print(float(jax.jit(lambda x: (x * 2).sum())(jnp.arange(4.0))))
options = hloopt.batch.BatchOptions(
    hloopt.batch.FileOptions(passes="all", check=True, verify_numerics=sys.argv[2] == "verify"), jobs=2
)
report = hloopt.batch.run([sys.argv[1]], options).to_dict()
print(json.dumps({"summary": report["summary"], "numerics": [m["numerics"] is not None for m in report["modules"]]}))
double = "HloModule d\\nENTRY e {\\n  p = f32[2] parameter(0)\\n  ROOT r = f32[2] add(p, p)\\n}\\n"
with hloopt.IsolatedPool(2) as pool:
    runs = [hloopt.execute(double, [np.array([i, 1.0], np.float32)], pool=pool)[0].tolist() for i in range(3)]
print(json.dumps(runs + [hloopt.execute(double, [np.ones(2, np.float32)])[0].tolist()]))
"""


@pytest.mark.parametrize("verify", sampled(["verify", "plain"], 2), ids=["--verify-numerics", "without"])
def test_a_batch_from_a_program_that_holds_jax_forks_nothing(tmp_path: Path, verify: str) -> None:
    modules = tmp_path / "modules"
    modules.mkdir()
    for name in ("int8_matmul.hlo", "fp8_mlp.hlo", "bf16_conv_batchnorm_train.hlo"):
        (modules / name).write_text((EXAMPLES / name).read_text())
    script = tmp_path / "user_script.py"
    script.write_text(SCRIPT)
    result = subprocess.run(
        [
            sys.executable,
            "-W",
            "error::RuntimeWarning",
            "-W",
            "error::DeprecationWarning",
            str(script),
            str(modules),
            verify,
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "fork" not in result.stderr and "Warning" not in result.stderr, result.stderr
    jitted, summary, executed = result.stdout.splitlines()
    assert json.loads(executed) == [[0.0, 2.0], [2.0, 2.0], [4.0, 2.0], [2.0, 2.0]]
    assert float(jitted) == 12.0
    assert json.loads(summary) == {
        "summary": {"processed": 3, "changed": 3, "unchanged": 0, "failed": 0, "skipped": 0},
        "numerics": [verify == "verify"] * 3,
    }
