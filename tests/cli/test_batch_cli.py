"""``hloopt run DIR``: real directories, real subprocesses, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from batch_children import kills_on
from hlo_text import hlo

from hloopt import parse
from hloopt.driver.chunks import as_file

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
PLAIN = hlo("""
    HloModule plain
    ENTRY e {
      ROOT p = f32[2] parameter(0)
    }
    """)
BAD = hlo("""
    HloModule m
    ENTRY e {
      ROOT b = f32[] add(x, y)
    }
    """)
not_root = pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")


def hloopt(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hloopt", *map(str, args)], check=False, capture_output=True, text=True, timeout=300
    )


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """in/ with the shipped examples at two depths, a plain module, a bad one and a file that is not a module."""
    root = tmp_path / "in"
    (root / "deep" / "er").mkdir(parents=True)
    (root / "int8_matmul.hlo").write_text((EXAMPLES / "int8_matmul.hlo").read_text())
    (root / "deep" / "mlp.txt").write_text((EXAMPLES / "fp8_bf16_mlp.hlo").read_text())
    (root / "deep" / "er" / "bn.hlo").write_text((EXAMPLES / "bf16_conv_batchnorm_train.hlo").read_text())
    (root / "deep" / "plain.hlo").write_text(PLAIN)
    (root / "deep" / "er" / "bad.hlo").write_text(BAD)
    (root / "notes.md").write_text("not a module\n")
    return root


def test_directory_mirrors_tree_reports_and_summarises(tree: Path, tmp_path: Path) -> None:
    before = snapshot(tree)
    out, report = tmp_path / "out", tmp_path / "report.json"
    result = hloopt("run", tree, "--passes", "all", "-o", out, "--report", report, "--jobs", "2")
    assert result.returncode == 1, result.stderr  # one module failed
    assert snapshot(tree) == before  # inputs untouched without --in-place
    assert sorted(snapshot(out)) == ["deep/er/bn.hlo", "deep/mlp.txt", "deep/plain.hlo", "int8_matmul.hlo"]
    assert (out / "deep" / "plain.hlo").read_text() == as_file(parse(PLAIN).to_text())
    assert "hloopt: 5 processed, 3 changed, 1 unchanged, 1 failed" in result.stderr
    assert f"hloopt: error: {tree}/deep/er/bad.hlo:3:22: instruction x does not exist" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    data = json.loads(report.read_text())
    assert data["summary"] == {"processed": 5, "changed": 3, "unchanged": 1, "failed": 1, "skipped": 0}
    modules = {Path(m["path"]).relative_to(tree).as_posix(): m for m in data["modules"]}
    assert list(modules) == ["deep/er/bad.hlo", "deep/er/bn.hlo", "deep/mlp.txt", "deep/plain.hlo", "int8_matmul.hlo"]
    bad = modules["deep/er/bad.hlo"]
    assert bad["status"] == "failed"
    assert bad["error"]["line"] == 3 and bad["error"]["column"] == 22 and bad["output"] is None
    counts = {p["name"]: p["rewritten"] for p in modules["deep/er/bn.hlo"]["passes"]}
    assert counts["batchnorm-training-upcast"] == 1 and counts["upcast-all-to-fp32"] > 0
    assert {p["name"]: p["rewritten"] for p in modules["int8_matmul.hlo"]["passes"]}["neuron-int-matmul-downcast"] >= 1
    assert all(m["seconds"] >= 0 for m in modules.values())


@pytest.mark.slow
def test_batch_output_equals_single_file_runs(tree: Path, tmp_path: Path) -> None:
    (tree / "deep" / "er" / "bad.hlo").unlink()
    out = tmp_path / "out"
    assert hloopt("run", tree, "--passes", "all,fold-constant-converts", "-o", out, "-j", "2").returncode == 0
    for path in tree.rglob("*.hlo"):
        single = hloopt("run", path, "--passes", "all,fold-constant-converts")
        assert (out / path.relative_to(tree)).read_text() == as_file(single.stdout), path


def test_glob_selects_files(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = hloopt("run", tree, "-o", out, "--glob", "deep/*.txt", "--glob", "int8_*")
    assert result.returncode == 0, result.stderr
    assert sorted(snapshot(out)) == ["deep/mlp.txt", "int8_matmul.hlo"]
    assert "2 processed" in result.stderr


def test_output_inside_input_is_not_read_back(tree: Path) -> None:
    (tree / "deep" / "er" / "bad.hlo").unlink()
    for _ in range(2):
        result = hloopt("run", tree, "-o", tree / "out")
        assert result.returncode == 0 and "4 processed" in result.stderr, result.stderr


@pytest.mark.slow
def test_check_mode_writes_nothing_and_fails_on_change(tree: Path, tmp_path: Path) -> None:
    (tree / "deep" / "er" / "bad.hlo").unlink()
    before = snapshot(tree)
    result = hloopt("run", tree, "--passes", "all", "--check", "-o", tmp_path / "out")
    assert result.returncode == 1 and "3 would change, 1 unchanged, 0 failed" in result.stderr
    assert snapshot(tree) == before and not (tmp_path / "out").exists()
    only_plain = hloopt("run", tree, "--passes", "all", "--check", "--glob", "plain.hlo")
    assert only_plain.returncode == 0, only_plain.stderr


def test_in_place_rewrites_changed_files_only(tree: Path) -> None:
    (tree / "deep" / "er" / "bad.hlo").unlink()
    canonical = parse(PLAIN).to_text()
    (tree / "deep" / "plain.hlo").write_text(canonical)
    stamp = (tree / "deep" / "plain.hlo").stat().st_mtime_ns
    result = hloopt("run", tree, "--passes", "all", "--in-place", "-j", "1")
    assert result.returncode == 0, result.stderr
    assert (tree / "deep" / "plain.hlo").stat().st_mtime_ns == stamp  # unchanged text is not rewritten
    assert "convert" in (tree / "int8_matmul.hlo").read_text()
    assert hloopt("run", tree, "--passes", "all", "--check").returncode == 0  # idempotent


def test_in_place_on_one_file_and_no_silent_overwrite(tmp_path: Path) -> None:
    source = tmp_path / "m.hlo"
    source.write_text(PLAIN)
    refused = hloopt("run", source, "-o", source)
    assert refused.returncode == 2 and "use --in-place" in refused.stderr and source.read_text() == PLAIN
    assert hloopt("run", source, "--in-place").returncode == 0
    assert source.read_text() == as_file(parse(PLAIN).to_text())


def test_dump_dir_per_module(tree: Path, tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    result = hloopt("run", tree, "--passes", "all", "-o", tmp_path / "out", "--dump-dir", dump)
    assert result.returncode == 1
    assert sorted(p.name for p in (dump / "deep" / "er" / "bn.hlo").iterdir()) == [
        "00-input.hlo",
        "01-after-batchnorm-training-upcast.hlo",
        "02-after-upcast-all-to-fp32.hlo",
    ]
    assert [p.name for p in (dump / "deep" / "plain.hlo").iterdir()] == ["00-input.hlo"]
    assert not (dump / "deep" / "er" / "bad.hlo").exists()


def test_diff_mode_prints_every_changed_module(tree: Path) -> None:
    result = hloopt("run", tree, "--passes", "all", "--diff")
    assert result.returncode == 1
    headers = [line for line in result.stdout.splitlines() if line.startswith("--- ")]
    assert headers == [
        f"--- {tree}/deep/er/bn.hlo",
        f"--- {tree}/deep/mlp.txt",
        f"--- {tree}/deep/plain.hlo",
        f"--- {tree}/int8_matmul.hlo",
    ]


@pytest.mark.parametrize(
    "args, message",
    [
        (["{tmp}/missing", "-o", "{tmp}/out"], "no such file"),
        (["{tmp}/in"], "is a directory; to process every module in it give -o OUTDIR"),
        (["{tmp}/in", "-o", "-"], "cannot be written to stdout"),
        (["{tmp}/in", "-o", "{tmp}/in/deep/plain.hlo"], "is a file, expected a directory"),
        (["{tmp}/in", "-o", "{tmp}/in"], "is the input directory; use --in-place"),
        (["{tmp}/in", "-o", "{tmp}/out", "--passes", "nope"], "unknown pass 'nope'"),
        (["{tmp}/in", "-o", "{tmp}/out", "--glob", "*.none"], "no files matching *.none"),
        (["{tmp}/in/deep/plain.hlo", "--jobs", "2"], "--jobs only applies to a directory INPUT"),
        (["{tmp}/in", "--in-place", "-o", "{tmp}/out"], "--in-place writes over INPUT"),
    ],
)
def test_argument_problems_exit_2(tree: Path, args: list[str], message: str) -> None:
    tmp = tree.parent
    before = snapshot(tree)
    result = hloopt("run", *[a.format(tmp=tmp) for a in args])
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(tree) == before and not (tmp / "out").exists()


@not_root
def test_unwritable_output_dir_exits_2(tree: Path, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        result = hloopt("run", tree, "-o", locked / "out")
        assert result.returncode == 2 and "permission denied" in result.stderr, result.stderr
    finally:
        locked.chmod(0o700)


@not_root
def test_unwritable_output_mid_batch_leaves_no_partial_file(tree: Path, tmp_path: Path) -> None:
    """One output directory is read-only: that module fails cleanly, the rest are written whole."""
    out = tmp_path / "out"
    (out / "deep").mkdir(parents=True)
    (out / "deep").chmod(0o500)
    try:
        result = hloopt("run", tree, "--passes", "all", "-o", out, "--report", tmp_path / "r.json", "-j", "2")
    finally:
        (out / "deep").chmod(0o700)
    assert result.returncode == 1
    assert "hloopt: 5 processed, 1 changed, 0 unchanged, 4 failed" in result.stderr, result.stderr
    locked = f"cannot write in directory {out}/deep: permission denied"
    assert f"hloopt: error: {tree}/deep/mlp.txt: {out}/deep/mlp.txt: {locked}" in result.stderr
    assert f"hloopt: error: {tree}/deep/er/bn.hlo: {out}/deep/er/bn.hlo: {locked}" in result.stderr
    assert snapshot(out) == {"int8_matmul.hlo": (out / "int8_matmul.hlo").read_bytes()}  # no temp, no partial file
    assert parse((out / "int8_matmul.hlo").read_text()).entry is not None


def test_output_blocked_mid_batch_leaves_no_partial_file(tree: Path, tmp_path: Path) -> None:
    """Works as root too: a directory sits where one output file goes, a file where an output directory goes."""
    out = tmp_path / "out"
    (out / "deep" / "plain.hlo").mkdir(parents=True)
    (out / "deep" / "er").write_text("a file, not a directory\n")
    result = hloopt("run", tree, "--passes", "all", "-o", out, "--report", tmp_path / "r.json", "-j", "2")
    assert result.returncode == 1
    assert "hloopt: 5 processed, 2 changed, 0 unchanged, 3 failed" in result.stderr, result.stderr
    # Each message names the module, then the output that could not be written.
    assert f"hloopt: error: {tree}/deep/plain.hlo: {out}/deep/plain.hlo: is a directory" in result.stderr
    assert f"hloopt: error: {tree}/deep/er/bn.hlo: {out}/deep/er/bn.hlo: {out}/deep/er is a file, not a directory" in (
        result.stderr
    )
    written = snapshot(out)
    assert sorted(written) == ["deep/er", "deep/mlp.txt", "int8_matmul.hlo"]  # no temporary or partial file
    assert written["deep/er"] == b"a file, not a directory\n"
    for name in ("deep/mlp.txt", "int8_matmul.hlo"):
        assert as_file(parse((out / name).read_text()).to_text()) == (out / name).read_text()  # whole, canonical
    failed = {Path(m["path"]).name for m in json.loads((tmp_path / "r.json").read_text())["modules"] if m["error"]}
    assert failed == {"bad.hlo", "bn.hlo", "plain.hlo"}


@not_root
def test_unreadable_module_fails_alone(tree: Path, tmp_path: Path) -> None:
    secret = tree / "deep" / "secret.hlo"
    secret.write_text(PLAIN)
    secret.chmod(0)
    result = hloopt("run", tree, "-o", tmp_path / "out", "-j", "2")
    assert result.returncode == 1 and f"hloopt: error: {secret}: permission denied" in result.stderr
    assert "6 processed, 0 changed, 4 unchanged, 2 failed" in result.stderr, result.stderr
    assert not (tmp_path / "out" / "deep" / "secret.hlo").exists()


def test_progress_bar_only_on_a_terminal(tree: Path, tmp_path: Path) -> None:
    """On a pipe, stderr has only the summary and errors; on a pty, click draws its bar."""
    import pty

    (tree / "deep" / "er" / "bad.hlo").unlink()
    piped = hloopt("run", tree, "-o", tmp_path / "a")
    assert piped.stderr.splitlines()[0].startswith("hloopt: 4 processed")
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hloopt", "run", str(tree), "-o", str(tmp_path / "b")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=follower,
    )
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    assert proc.wait(timeout=120) == 0
    os.close(leader)
    assert b"hloopt" in seen and b"100%" in seen, seen


# --- several INPUTs: a batch of those paths (what pre-commit hooks pass) ------------------------------


@pytest.mark.slow
def test_several_files_check_and_in_place(tree: Path, tmp_path: Path) -> None:
    (tree / "deep" / "er" / "bad.hlo").unlink()
    canonical = tree / "deep" / "plain.hlo"
    canonical.write_text(parse(PLAIN).to_text())
    plain = tmp_path / "plain.hlo"
    plain.write_text(PLAIN)
    assert hloopt("run", "--check", canonical, canonical).returncode == 0  # named twice: one module
    checked = hloopt("run", "--check", canonical, plain, "--report", tmp_path / "r.json")
    assert checked.returncode == 1 and "hloopt: 2 processed, 1 would change, 1 unchanged, 0 failed" in checked.stderr
    assert f"hloopt: {plain} would change" in checked.stderr and f"{canonical} would change" not in checked.stderr
    assert json.loads((tmp_path / "r.json").read_text())["input"] == [str(canonical), str(plain)]
    stamp = canonical.stat().st_mtime_ns
    before = snapshot(tree)
    fixed = hloopt("run", "--in-place", "--passes", "all", canonical, plain, tree / "deep" / "er")
    assert fixed.returncode == 0, fixed.stderr
    assert "hloopt: 3 processed" in fixed.stderr  # the directory's one module, and the two files
    assert plain.read_text() == as_file(parse(PLAIN).to_text()) and canonical.stat().st_mtime_ns == stamp
    assert snapshot(tree)["deep/er/bn.hlo"] != before["deep/er/bn.hlo"]
    assert hloopt("run", "--check", "--passes", "all", canonical, plain, tree / "deep" / "er").returncode == 0


def test_several_inputs_with_a_bad_module_is_a_failed_batch(tree: Path) -> None:
    result = hloopt("run", "--check", tree / "deep" / "plain.hlo", tree / "deep" / "er" / "bad.hlo", "--diff")
    assert result.returncode == 1  # as for a directory: a module failed
    assert "hloopt: 2 processed, 1 would change, 0 unchanged, 1 failed" in result.stderr
    assert f"hloopt: error: {tree}/deep/er/bad.hlo:3:22: instruction x does not exist" in result.stderr
    assert result.stdout.startswith(f"--- {tree}/deep/plain.hlo\n+++ {tree}/deep/plain.hlo (after)\n")


@pytest.mark.parametrize(
    "args, message",
    [
        (["{tmp}/in/deep/plain.hlo", "{tmp}/in/int8_matmul.hlo"], "several INPUTs: to process them give --in-place"),
        (["{tmp}/in/deep/plain.hlo", "{tmp}/in", "-o", "{tmp}/out"], "-o takes a single INPUT; with several, give"),
        (
            ["{tmp}/in/deep/plain.hlo", "{tmp}/in", "--check", "--passes", "all", "--dump-dir", "{tmp}/d"],
            "--dump-dir takes a single",
        ),
        (["-", "{tmp}/in/deep/plain.hlo", "--check"], "- (stdin) must be the only INPUT"),
        (["{tmp}/in/deep/plain.hlo", "{tmp}/missing.hlo", "--in-place"], "missing.hlo: no such file or directory"),
    ],
)
def test_several_inputs_argument_problems_exit_2(tree: Path, args: list[str], message: str) -> None:
    tmp = tree.parent
    before = snapshot(tree)
    result = hloopt("run", *[a.format(tmp=tmp) for a in args])
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert snapshot(tree) == before and not (tmp / "out").exists() and not (tmp / "d").exists()


def test_what_is_not_a_regular_file_is_skipped_unread(tmp_path: Path) -> None:
    """A FIFO named like a module would hang the batch, a link to /dev/zero never ends: neither is opened.
    Each is skipped, said in the summary and listed in the report; the modules beside them run."""
    root = tmp_path / "in"
    root.mkdir()
    (root / "plain.hlo").write_text(PLAIN)
    os.mkfifo(root / "fifo.hlo")
    (root / "zero.hlo").symlink_to("/dev/zero")
    (root / "null.txt").symlink_to("/dev/null")
    result = hloopt("run", root, "--check", "--report", tmp_path / "r.json")
    assert result.returncode == 1, result.stderr  # plain.hlo is not canonical
    assert "1 processed, 1 would change, 0 unchanged, 0 failed, 3 skipped (not modules)" in result.stderr, result.stderr
    skipped = {Path(s["path"]).name: s["reason"] for s in json.loads((tmp_path / "r.json").read_text())["skipped"]}
    assert skipped == {
        "fifo.hlo": "a FIFO, not a regular file: not read",
        "null.txt": "a character device, not a regular file: not read",
        "zero.hlo": "a character device, not a regular file: not read",
    }


def _too_deep(parent: Path) -> Path:
    """A chain of directories below `parent` whose path is longer than the kernel's PATH_MAX, made a step at
    a time: what no one, root included, can list by its path (`os.walk` lists by path)."""
    fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    name = "d" * 250
    try:
        for _ in range(20):
            os.mkdir(name, dir_fd=fd)
            deeper = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = deeper
    finally:
        os.close(fd)
    return parent / name


def test_an_unreadable_subdirectory_fails_alone(tmp_path: Path) -> None:
    """One rule for what a batch finds that it cannot read, file or subdirectory: that entry fails, with
    its reason, and the rest of the batch runs. (An INPUT that cannot be read is refused up front.)"""
    root, out = tmp_path / "in", tmp_path / "out"
    root.mkdir()
    (root / "plain.hlo").write_text(PLAIN)
    _too_deep(root)
    result = hloopt("run", root, "-o", out, "--report", tmp_path / "r.json")
    assert result.returncode == 1, result.stderr
    unlisted = next(m for m in json.loads((tmp_path / "r.json").read_text())["modules"] if m["error"])
    assert len(unlisted["path"]) > 4096
    assert unlisted["error"]["message"] == f"{unlisted['path']}: cannot list directory: File name too long"
    assert "2 processed, 1 changed, 0 unchanged, 1 failed" in result.stderr, result.stderr
    assert (out / "plain.hlo").exists()


@pytest.mark.parametrize("names", [["a.hlo", "boom.hlo", "z.hlo"], ["boom.hlo"]], ids=["three files", "one file"])
def test_a_module_that_kills_its_process_costs_only_itself_with_jobs_1(tmp_path: Path, names: list[str]) -> None:
    """--jobs 1 and a batch of one file run in a worker process too: the summary and the report are written."""
    root = tmp_path / "in"
    root.mkdir()
    for name in names:
        (root / name).write_text(PLAIN)
    entry = (
        f"from hloopt.support import pool; pool.PROGRAM = {kills_on('boom.hlo')!r}; "
        "from hloopt.cli.main import main; main()"
    )
    args = ["run", str(root), "-o", str(tmp_path / "out"), "--jobs", "1", "--report", str(tmp_path / "r.json")]
    result = subprocess.run(
        [sys.executable, "-c", entry, *args], check=False, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 1, result.stderr
    others = len(names) - 1
    assert f"{len(names)} processed, {others} changed, 0 unchanged, 1 failed" in result.stderr, result.stderr
    died = f"{root}/boom.hlo: the worker process died while processing this file (crash or out of memory)"
    assert f"hloopt: error: {died}" in result.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert [m["error"] for m in report["modules"] if m["error"]] == [{"message": died}]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [n for n in names if n != "boom.hlo"]
