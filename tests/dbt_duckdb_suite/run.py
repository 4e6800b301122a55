"""Run dbt-duckdb's own functional suite on `type: quail`, then on `type: duckdb` the tests
that did not pass on quail, and compare the outcomes test by test (issue 13, item 9): a test
that passes on duckdb and not on quail is a regression. The duckdb run takes only the tests
quail did not pass (a test quail passes cannot be one that passes on duckdb only), which halves
the suite's time; the full side-by-side run is `--both`.

The suite comes from the PyPI sdist of the installed dbt-duckdb version (the one
requirements/constraints.txt pins), which ships tests/functional; only its tests/ and
pytest.ini are extracted, so the installed adapter is the one under test. Both runs use the
same pytest plugin (quail_profile.py beside this file), the same skip list (network and
uninstalled plugins only) and the same profile (`--profile file`, a DuckDB file per session:
how a quail project runs; it also runs the attach tests that an in-memory profile skips).

Exit status: 0 when every test that passes on duckdb passes on quail; 1 when not; 2 when the
suite could not be run or a run did not produce results (download failed, pytest crashed,
nothing passed on quail, the profile rewrite did not take).

    python tests/dbt_duckdb_suite/run.py [--workdir DIR] [--sdist FILE] [--workers N] [--both]
"""

from __future__ import annotations

import argparse
import collections
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ADAPTERS = ("duckdb", "quail")
COLUMNS = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


class SuiteError(Exception):
    """The suite could not be run (exit status 2)."""


def pinned_version() -> str | None:
    constraints = ROOT / "requirements" / "constraints.txt"
    if not constraints.is_file():
        return None
    for line in constraints.read_text().splitlines():
        if line.strip().lower().startswith("dbt-duckdb=="):
            return line.split("==", 1)[1].strip()
    return None


def download_sdist(version: str, dest: Path) -> Path:
    found = sorted(dest.glob(f"dbt_duckdb-{version}.tar.gz"))
    if found:
        return found[0]
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary",
           ":all:", f"dbt-duckdb=={version}", "--dest", str(dest)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    found = sorted(dest.glob(f"dbt_duckdb-{version}.tar.gz"))
    if proc.returncode != 0 or not found:
        raise SuiteError(f"pip download of the dbt-duckdb {version} sdist failed: "
                         f"{proc.stderr.strip()[-400:]}")
    return found[0]


def extract_suite(sdist: Path, dest: Path) -> Path:
    """tests/ and pytest.ini only: the sdist's dbt/ package must not shadow the installed one."""
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers()
                   if m.name.partition("/")[2].startswith(("tests/", "pytest.ini"))]
        if not any("/tests/functional/" in m.name for m in members):
            raise SuiteError(f"{sdist.name} holds no tests/functional")
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(dest, members=members, **safe)
    root = dest / members[0].name.partition("/")[0]
    return root


def run_suite(suite: Path, adapter: str, workdir: Path, workers: int, timeout: float,
              extra: list[str], only: list[str] | None = None) -> tuple[dict, float, Path]:
    """One pytest run of the suite on `adapter`: the whole of tests/functional, or the test
    ids `only`."""
    results = workdir / f"results-{adapter}.json"
    log = workdir / f"pytest-{adapter}.log"
    results.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", *(only or ["tests/functional"]), "-p", "quail_profile",
           "-p", "no:cacheprovider", "--profile", "file", "-q", "-rfE", "-W", "ignore",
           "--basetemp", str(workdir / f"tmp-{adapter}")]
    if workers > 1 and importlib.util.find_spec("xdist") is not None:
        cmd += ["-n", str(workers), "--dist", "loadscope"]
    env = dict(os.environ, QUAIL_SUITE_ADAPTER=adapter, QUAIL_SUITE_RESULTS=str(results),
               DO_NOT_TRACK="1", COLUMNS="220", QUAIL_CACHE_DIR=str(workdir / "quail-cache"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(HERE),
                                                         os.environ.get("PYTHONPATH")])))
    env.pop("PYTEST_ADDOPTS", None)
    started = time.monotonic()
    with log.open("w") as out:
        try:
            proc = subprocess.run(cmd + extra, cwd=suite, env=env, stdout=out,
                                  stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise SuiteError(f"the {adapter} run passed its {timeout:.0f} s limit "
                             f"(log: {log})") from exc
    seconds = time.monotonic() - started
    if proc.returncode not in (0, 1) or not results.is_file():
        raise SuiteError(f"the {adapter} run ended with pytest exit status {proc.returncode} "
                         f"and {'no' if not results.is_file() else 'a'} results file; log: {log}\n"
                         + tail(log, 15))
    return json.loads(results.read_text()), seconds, log


def tail(path: Path, lines: int) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def check_adapter(adapter: str, data: dict) -> None:
    """Every test that set up a dbt project ran it on the adapter this run is about."""
    seen = collections.Counter(t["adapter"] for t in data["tests"].values() if t["adapter"])
    wrong = {name: n for name, n in seen.items() if name != adapter}
    if not seen or wrong:
        raise SuiteError(f"the {adapter} run set up its projects on {dict(seen) or 'nothing'}: "
                         "the profile rewrite did not take")


def summary_lines(log: Path, ids: list[str]) -> list[str]:
    """pytest's `FAILED id - message` / `ERROR id - message` lines for these test ids."""
    wanted = set(ids)
    return [line for line in log.read_text(errors="replace").splitlines()
            if line.startswith(("FAILED ", "ERROR ")) and line.split()[1] in wanted]


def counts(data: dict) -> collections.Counter:
    return collections.Counter(t["outcome"] for t in data["tests"].values())


def skip_reasons() -> dict[str, str]:
    import quail_profile  # beside this script, whose folder Python puts first on the path

    return {**quail_profile.skip_reasons(), **quail_profile.not_collected()}


def summary(version: str, runs: dict, workdir: Path, both: bool) -> tuple[str, bool]:
    """The comparison; `both`: the duckdb run was the whole suite, not only the tests quail
    did not pass."""
    plain, quail = (runs[a][0]["tests"] for a in ADAPTERS)
    passed = {a: {k for k, t in runs[a][0]["tests"].items() if t["outcome"] == "passed"}
              for a in ADAPTERS}
    lost = sorted(passed["duckdb"] - passed["quail"])
    gained = sorted(passed["quail"] - passed["duckdb"]) if both else []
    scope = "" if both else ", only those quail did not pass"
    lines = [f"dbt-duckdb {version} functional suite, --profile file: {len(quail)} tests "
             f"(quail run), {len(plain)} (duckdb run{scope})",
             f"{'':8}" + "".join(f"{c:>9}" for c in COLUMNS) + f"{'seconds':>9}"]
    for adapter in ADAPTERS:
        data, seconds, _ = runs[adapter]
        c = counts(data)
        lines.append(f"{adapter:8}" + "".join(f"{c.get(k, 0):>9}" for k in COLUMNS)
                     + f"{seconds:>9.1f}")
    lines.append("left out by this runner (both runs):")
    lines += [f"  {path}: {why}" for path, why in sorted(skip_reasons().items())]
    by_suite = collections.Counter(
        " ".join(t.get("reason", "").split())[:80] for t in quail.values()
        if t["outcome"] == "skipped" and not t.get("reason", "").startswith("[quail suite]"))
    lines.append(f"skipped by the suite itself (quail run): {'' if by_suite else 'none'}")
    lines += [f"  {n:>3} x {why}" for why, n in by_suite.most_common()]
    for title, ids, other in (("pass on duckdb, not on quail", lost, quail),
                              ("pass on quail, not on duckdb", gained, plain)):
        lines.append(f"{title}: {len(ids) or 'none'}")
        lines += [f"  {i}: {other.get(i, {}).get('outcome') or 'not run'}" for i in ids[:20]]
    if lost:
        lines.append("quail's short summary of those (full tracebacks in its log):")
        lines += [f"  {line[:160]}" for line in summary_lines(runs["quail"][2], lost)[:20]]
    failing = sorted(k for k, t in plain.items() if t["outcome"] in ("failed", "error"))
    if failing:
        lines.append(f"fail on plain dbt-duckdb ({len(failing)}): " + ", ".join(failing[:8]))
    ok = not lost
    lines.append(f"logs: {workdir}/pytest-quail.log, {workdir}/pytest-duckdb.log")
    lines.append((f"OK: quail passes every test dbt-duckdb passes (quail passes "
                  f"{len(passed['quail'])}; duckdb passes {len(passed['duckdb'])} of the "
                  f"{len(plain)} it ran{scope})") if ok else
                 f"FAIL: {len(lost)} pass on duckdb only (quail passes {len(passed['quail'])})")
    return "\n".join(lines), ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, help="kept after the run (default: a temp dir)")
    parser.add_argument("--sdist", type=Path, help="a dbt-duckdb sdist already downloaded")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                        help="pytest-xdist workers per run (default: 2)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run")
    parser.add_argument("--both", action="store_true",
                        help="run the whole suite on duckdb too (default: only the tests quail "
                             "did not pass)")
    parser.add_argument("pytest_args", nargs="*", help="passed to both pytest runs (after --)")
    args = parser.parse_args(argv)
    version = importlib.metadata.version("dbt-duckdb")
    pin = pinned_version()
    if pin and pin != version:
        print(f"note: dbt-duckdb {version} is installed, constraints pin {pin}; "
              f"testing the installed {version}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="dbt-duckdb-suite-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        sdist = args.sdist or download_sdist(version, workdir)
        suite = extract_suite(sdist, workdir)
        runs = {"quail": run_suite(suite, "quail", workdir, args.workers, args.timeout,
                                   args.pytest_args)}
        check_adapter("quail", runs["quail"][0])
        if not counts(runs["quail"][0]).get("passed"):
            raise SuiteError("no test passed on quail: the suite did not run")
        others = sorted(k for k, t in runs["quail"][0]["tests"].items()
                        if t["outcome"] != "passed")
        if args.both or others:
            runs["duckdb"] = run_suite(suite, "duckdb", workdir, args.workers, args.timeout,
                                       args.pytest_args, None if args.both else others)
            if any(t["adapter"] for t in runs["duckdb"][0]["tests"].values()):
                check_adapter("duckdb", runs["duckdb"][0])
        else:  # quail passed every test: none can pass on duckdb alone
            runs["duckdb"] = ({"tests": {}}, 0.0, workdir / "pytest-duckdb.log")
    except SuiteError as exc:
        print(f"error: {exc}")
        return 2
    text, ok = summary(version, runs, workdir, args.both)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
