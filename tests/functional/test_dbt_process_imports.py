"""dbt's own process never imports transformers, even on a fresh cache where the embedded GGUF
model is converted on first use (in a child process) and `dbt debug` checks its fingerprint.
With freezegun and pandas 3 present, as in dbt-duckdb's test suite, a process that had
imported transformers crashed in a later test.

Each test runs dbt in-process (dbtRunner) inside a fresh Python child, which then prints the
top-level modules it holds."""

import json
import os
import subprocess
import sys

import pytest
from dbt_subprocess import dbt_env, write_project

from quail_engine.infer.embedded import embedded_gguf
from quail_engine.settings import cache_path

pytestmark = [pytest.mark.dbt, pytest.mark.model]

_CHILD = """
import json, sys
from dbt.cli.main import dbtRunner
root, commands = sys.argv[1], json.loads(sys.argv[2])
results = []
for command in commands:
    done = dbtRunner().invoke([*command, "--project-dir", root, "--profiles-dir", root])
    results.append(done.success)
print(json.dumps({"success": results, "modules": sorted({m.split(".")[0] for m in sys.modules})}))
"""

_REVIEWS = "id,review_text\n1,The kettle works well.\n2,It broke after a week.\n"
_MODEL = """
{{ config(materialized='table', quail_dialect='snowflake') }}
select id, AI_CLASSIFY(review_text, ['positive', 'negative']):labels[0]::string as sentiment
from {{ ref('reviews') }}
"""


def _fresh_cache(tmp_path, require_embedded):
    """An empty cache root holding only the reassembled embedded GGUF (linked from this
    machine's cache when it is there, to skip reassembling it): the model is not converted."""
    require_embedded("default")
    root = tmp_path / "cache"
    (root / "models").mkdir(parents=True)
    source = embedded_gguf("default")
    if source.parent == cache_path("models"):
        try:
            os.link(source, root / "models" / source.name)
        except OSError:
            pass
    return root


def _project(tmp_path, files):
    root = tmp_path / "project"
    root.mkdir()
    return write_project(root, files)


def _run_dbt_in_child(root, cache, *commands):
    env = {**dbt_env(), "QUAIL_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-c", _CHILD, str(root), json.dumps(commands)],
                          env=env, cwd=root, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report, done.stdout


def test_dbt_debug_checks_the_model_without_transformers(tmp_path, require_embedded):
    cache = _fresh_cache(tmp_path, require_embedded)
    root = _project(tmp_path, {})
    report, out = _run_dbt_in_child(root, cache, ["debug"])
    assert report["success"] == [True], out
    assert "transformers" not in report["modules"], out
    assert "model default: gemma3, 18 layers" in out
    assert "tokenizer.json reads" in out and "fingerprint matches" in out
    converted = [p for p in (cache / "models").iterdir() if p.is_dir()]
    assert converted and (converted[0] / "config.json").exists()


def test_dbt_run_of_an_ai_model_on_a_fresh_cache_without_transformers(tmp_path,
                                                                       require_embedded):
    cache = _fresh_cache(tmp_path, require_embedded)
    root = _project(tmp_path, {"seeds/reviews.csv": _REVIEWS, "models/sentiment.sql": _MODEL})
    report, out = _run_dbt_in_child(root, cache, ["seed"], ["run"])
    assert report["success"] == [True, True], out
    assert "transformers" not in report["modules"], out
    assert "sentiment: 2 rows" in out
