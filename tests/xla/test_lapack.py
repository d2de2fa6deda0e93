"""Modules with the LAPACK custom calls jax lowers its linear algebra to run, with jax.jit's results.

Each module is generated here by jax (`jax.jit(f).lower(...).as_text(dialect="hlo")`), so it calls whatever
`lapack_*` targets the installed jaxlib lowers to (typed FFI in 0.10 to 0.12). They used to kill the worker
(SIGSEGV: jax fills in LAPACK's routines only when it lowers a linalg op itself), and `hloopt.execute` ran
in-process, killing the caller.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from conftest import sampled

import hloopt
from hloopt.arrays.npz import save_arrays
from hloopt.xla.bridge import IsolatedPool

_RNG = np.random.default_rng(23)
_A = (_RNG.standard_normal((4, 4)) + 4 * np.eye(4)).astype(np.float32)
_SPD = (_A @ _A.T + np.eye(4)).astype(np.float32)
_B = _RNG.standard_normal((4, 2)).astype(np.float32)
_TALL = _RNG.standard_normal((5, 3)).astype(np.float32)
_C = (_A + 1j * _RNG.standard_normal((4, 4))).astype(np.complex64)
_HERMITIAN = (_C @ _C.conj().T + np.eye(4)).astype(np.complex64)
_BANDS = [_RNG.standard_normal(4).astype(np.float32) for _ in range(3)]

#: name → (function, arguments): every jnp.linalg / jax.scipy.linalg / lax.linalg entry point that lowers to
#: LAPACK on the CPU, in real and complex types (the s/c and, through eig's result, z variants).
CASES: dict[str, tuple[Callable[..., Any], tuple[np.ndarray, ...]]] = {
    "inv": (jnp.linalg.inv, (_A,)),
    "solve": (jnp.linalg.solve, (_A, _B)),
    "det": (jnp.linalg.det, (_A,)),
    "slogdet": (jnp.linalg.slogdet, (_A,)),
    "cholesky": (jnp.linalg.cholesky, (_SPD,)),
    "qr": (jnp.linalg.qr, (_A,)),
    "qr_complete": (lambda x: jnp.linalg.qr(x, mode="complete"), (_TALL,)),
    "qr_pivoting": (lambda x: jsl.qr(x, pivoting=True), (_A,)),
    "eigh": (jnp.linalg.eigh, (_SPD,)),
    "eigvalsh": (jnp.linalg.eigvalsh, (_SPD,)),
    "svd": (jnp.linalg.svd, (_A,)),
    "svdvals": (lambda x: jnp.linalg.svd(x, compute_uv=False), (_TALL,)),
    "eig": (jnp.linalg.eig, (_A,)),
    "eigvals": (jnp.linalg.eigvals, (_A,)),
    "lstsq": (lambda a, b: jnp.linalg.lstsq(a, b)[0], (_TALL, _TALL[:, :2])),
    "pinv": (jnp.linalg.pinv, (_TALL,)),
    "matrix_rank": (jnp.linalg.matrix_rank, (_A,)),
    "lu": (jsl.lu, (_A,)),
    "lu_factor": (jsl.lu_factor, (_A,)),
    "solve_triangular": (lambda a, b: jsl.solve_triangular(jnp.tril(a), b, lower=True), (_A, _B)),
    "cho_solve": (lambda a, b: jsl.cho_solve(jsl.cho_factor(a), b), (_SPD, _B)),
    "schur": (jsl.schur, (_A,)),
    "hessenberg": (jsl.hessenberg, (_A,)),
    "tridiagonal": (jax.lax.linalg.tridiagonal, (_SPD,)),
    "tridiagonal_solve": (
        lambda dl, d, du, b: jax.lax.linalg.tridiagonal_solve(dl.at[0].set(0), d + 4, du.at[-1].set(0), b),
        (*_BANDS, _B),
    ),
    "inv_c64": (jnp.linalg.inv, (_C,)),
    "eigh_c64": (jnp.linalg.eigh, (_HERMITIAN,)),
    "qr_c64": (jnp.linalg.qr, (_C,)),
    "svd_c64": (jnp.linalg.svd, (_C,)),
    "cholesky_c64": (jnp.linalg.cholesky, (_HERMITIAN,)),
}


def _module(name: str) -> str:
    fn, args = CASES[name]
    return jax.jit(fn).lower(*args).as_text(dialect="hlo")


def _expected(name: str) -> list[np.ndarray]:
    fn, args = CASES[name]
    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(jax.jit(fn)(*args))]


def _assert_like_jax(name: str, outputs: list[np.ndarray]) -> None:
    """The same leaves as jax.jit, equal to a few float32 ULPs (the same LAPACK routine on the same inputs;
    XLA may fuse the code around it differently after hloopt's print)."""
    expected = _expected(name)
    assert len(outputs) == len(expected), name
    for got, want in zip(outputs, expected):
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.fixture(scope="module")
def modules() -> dict[str, str]:
    return {name: _module(name) for name in CASES}


def test_every_case_calls_lapack(modules: dict[str, str]) -> None:
    """The cases test what they say: each module calls a LAPACK (or jaxlib CPU solver) custom call."""
    for name, text in modules.items():
        assert 'custom_call_target="lapack_' in text or "tridiagonal" in name, name


@pytest.mark.slow
def test_hloopt_execute_runs_them_like_jax_jit(modules: dict[str, str]) -> None:
    with IsolatedPool(1) as pool:
        for name, text in modules.items():
            _assert_like_jax(name, hloopt.execute(text, list(CASES[name][1]), pool=pool))


def test_hloopt_execute_without_a_pool_runs_in_a_worker_of_its_own(modules: dict[str, str]) -> None:
    _assert_like_jax("inv", hloopt.execute(modules["inv"], [_A]))


@pytest.mark.slow  # CI runs it; the fast tier keeps hloopt.execute of every module
def test_hloopt_compare_finds_them_bit_identical_to_themselves(modules: dict[str, str]) -> None:
    with IsolatedPool(1) as pool:
        for name, text in modules.items():
            report = hloopt.compare(text, text, list(CASES[name][1]), pool=pool)
            assert report.ok and report.bit_identical, name


@pytest.mark.parametrize("name", sampled(sorted(CASES), 18))  # each is a new process: in-process above
def test_hloopt_exec_runs_them_like_jax_jit(name: str, modules: dict[str, str], tmp_path: Path) -> None:
    module = tmp_path / f"{name}.hlo"
    module.write_text(modules[name])
    save_arrays(str(tmp_path / "in.npz"), "input", CASES[name][1])
    command = [sys.executable, "-m", "hloopt", "exec", str(module), "--inputs", str(tmp_path / "in.npz")]
    result = subprocess.run([*command, "-o", str(tmp_path / "out.npz")], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    with np.load(tmp_path / "out.npz") as archive:
        _assert_like_jax(name, [archive[f"output{i}"] for i in range(len(archive.files))])


@pytest.mark.slow
def test_hloopt_compare_runs_them_all_in_one_file(modules: dict[str, str], tmp_path: Path) -> None:
    """`compare --split-input-file`: every module against itself, through the CLI."""
    both = tmp_path / "all.hlo"
    both.write_text("\n// -----\n".join(modules.values()))
    result = subprocess.run(
        [sys.executable, "-m", "hloopt", "compare", str(both), str(both), "--split-input-file"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("all outputs within tolerance") == len(modules)
    assert " no " not in result.stdout  # every output bit-identical


@pytest.mark.slow  # CI runs it; the fast tier keeps the kernels of the common decompositions
def test_jaxlib_cpu_kernels_jax_registers_only_on_demand_run_too() -> None:
    """jaxlib's sparse CPU kernel is registered by ``jax.experimental.sparse`` alone, which a worker never
    imports: the bridge registers every CPU target of jaxlib's wrappers, not a list of LAPACK names."""
    from jax.experimental import sparse

    dense = np.eye(4, dtype=np.float32) * 2
    dense[0, 3] = 1
    matrix = sparse.BCSR.fromdense(dense)

    def product(data: Any, indices: Any, indptr: Any, b: Any) -> Any:
        return sparse.BCSR((data, indices, indptr), shape=(4, 4)) @ b

    args = (matrix.data, matrix.indices, matrix.indptr, _B)
    text = jax.jit(product).lower(*args).as_text(dialect="hlo")
    assert 'custom_call_target="cpu_csr_sparse_dense_ffi"' in text
    (got,) = hloopt.execute(text, [np.asarray(a) for a in args])
    np.testing.assert_allclose(got, np.asarray(jax.jit(product)(*args)), rtol=1e-6)
    np.testing.assert_allclose(got, dense @ _B, rtol=1e-6)


#: hloopt.jax.jit of a LAPACK call, in a fresh interpreter: it runs, and the bridge readied nothing itself.
_JIT_IN_THE_CALLER = """
import numpy as np, jax.numpy as jnp
import hloopt.jax
from hloopt.xla import bridge

a = np.array([[4.0, 1.0], [2.0, 3.0]], np.float32)
got = np.asarray(hloopt.jax.jit(jnp.linalg.inv)(a))
np.testing.assert_allclose(got, np.linalg.inv(a), rtol=1e-6)
print(bridge._ready_cpu_custom_calls.cache_info().currsize)
"""


def test_the_callers_process_keeps_jaxs_own_custom_call_registrations() -> None:
    """`hloopt.jax.jit` compiles in its caller's process: jax readied the LAPACK targets its lowering calls,
    and the bridge registers nothing process-wide there (it does so only in a worker)."""
    result = subprocess.run(
        [sys.executable, "-c", _JIT_IN_THE_CALLER], check=False, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"
