"""Inputs of the end-to-end GPU bench (bench/e2e_gpu.py), made where it runs: seeded Parquet
corpora whose documents have the benchmark's token lengths under the model's tokenizer (the
random-weight model directory itself: quail_testing/model_dir.py).

What the GPU machine lacks travels in .carry/e2e/ (git-ignored; ~50 MB of the 64 MiB a device
call may carry), written on the CPU by `python -m bench e2e-gpu --prepare`: tok/, the embedded
default model's tokenizer gzipped (vocabulary 262,144), and whl/, cp312 manylinux wheels of
duckdb, sqlglot and the dbt stack minus what the machine has (the modules a `dbt build` of a
`type: quail` project imports, read off a local run)."""

from __future__ import annotations

import random
from pathlib import Path

WORDS = """patient reported mild severe headache nausea after dose the of and with was in
treatment week day hospital rash fever fatigue dizziness pain chest abdominal liver kidney
elevated levels blood pressure heart rate increased decreased normal therapy drug study
clinical trial adverse event onset resolved continued stopped discontinued follow visit
baseline history diagnosis condition symptoms observed noted mg daily twice oral injection
review product quality service delivery price great poor excellent terrible would recommend
again customer order arrived late broken works well battery screen sound small large color
because however although while during before since within without across between among
""".split()
TERMS = """acute kidney injury|drug induced liver injury|severe cutaneous reaction|anaphylaxis
|QT interval prolongation|serotonin syndrome|neuroleptic malignant syndrome|rhabdomyolysis
|Stevens Johnson syndrome|agranulocytosis|pancreatitis|interstitial lung disease
|hypoglycaemia|lactic acidosis|angioedema|thrombocytopenia|hyponatraemia|seizure
|peripheral neuropathy|tendon rupture""".replace("\n", "").split("|")


CARRY_WHEELS = """duckdb==2.0.1 sqlglot==30.30.0 dbt-core==1.12.0 dbt-adapters==1.24.5
dbt-common==1.39.0 dbt-duckdb==1.11.1 dbt-extractor==0.6.0 dbt-protos==1.0.615 agate==1.9.1
babel==2.19.0 daff==1.4.2 isodate==0.7.2 leather==0.4.1 parsedatetime==2.6 python-slugify==9.2.0
text-unidecode==1.3 pytimeparse==1.1.10 mashumaro==3.17 metricflow==0.213.0 more-itertools==10.8.0
importlib-metadata==10.2.0 lazy-importer==0.1.0 opentelemetry-api==1.45.2 pydantic==2.14.4
pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0
python-dotenv==1.2.4 pytz==2026.6 referencing==0.37.0 rpds-py==2026.9.1 jsonschema==4.26.0
jsonschema-specifications==2025.9.1 snowplow-tracker==1.1.0 sqlparse==0.5.5 click==8.5.1
protobuf==6.33.6 deepdiff==8.6.2 orderly-set==5.5.0 llguidance==1.9.1 gguf==0.19.0""".split()
# (llguidance publishes manylinux_2_31 wheels only; the GPU machine has neither it nor gguf)
PLATFORMS = ("manylinux_2_31_x86_64", "manylinux_2_28_x86_64", "manylinux_2_27_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")


def prepare_wheels(target: Path) -> Path:
    """pip download (no dependencies) of CARRY_WHEELS for CPython 3.12 on x86-64 Linux."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
           "--python-version", "3.12", "--implementation", "cp", "-d", str(target)]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    subprocess.run(cmd + CARRY_WHEELS, check=True)
    return target


def _text(rng: random.Random, num_tokens: int, word_tokens: dict[str, int]) -> str:
    words, n = [], 0
    while n < num_tokens:
        w = rng.choice(WORDS)
        words.append(w)
        n += word_tokens[w]
    return " ".join(words)


def word_tokens(tokenizer) -> dict[str, int]:
    """Tokens each word takes after a space (a text's count is close to their sum)."""
    return {w: len(ids) for w, ids in zip(WORDS, tokenizer.encode_batch([" " + w for w in WORDS]))}


def write_corpora(directory: Path, tokenizer, filter_docs: int, join_anchors: int,
                  join_partners: int, seed: int = 0, doc_tokens: tuple[int, int] = (200, 400),
                  report_tokens: tuple[int, int] = (3500, 4500)) -> dict[str, Path]:
    """docs(id, text) of ~300 tokens; reports(id, text) of ~4,000 tokens; terms(id, term) of
    ~15 tokens (a reaction name and a qualifier): Parquet files under `directory`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    sizes = word_tokens(tokenizer)
    directory.mkdir(parents=True, exist_ok=True)
    tables = {
        "docs": {"id": list(range(filter_docs)),
                 "text": [_text(rng, rng.randint(*doc_tokens), sizes) for _ in range(filter_docs)]},
        "reports": {"id": list(range(join_anchors)),
                    "text": [_text(rng, rng.randint(*report_tokens), sizes)
                             for _ in range(join_anchors)]},
        "terms": {"id": list(range(join_partners)),
                  "term": [f"{rng.choice(TERMS)} {_text(rng, rng.randint(6, 10), sizes)}"
                           for _ in range(join_partners)]},
    }
    paths = {}
    for name, columns in tables.items():
        paths[name] = directory / f"{name}.parquet"
        pq.write_table(pa.table(columns), paths[name])
    return paths
