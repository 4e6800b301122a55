"""`python -m bench <suite> [args]`: run one benchmark suite; `python -m bench` lists them.
Each suite writes its result through bench/results_io.py; bench/README.md says what each
measures, on which machine, and which committed file in bench/results/ holds its latest run."""

from __future__ import annotations

import importlib
import sys

# suite -> (module, machine, what it measures)
SUITES = {
    "e2e-gpu": ("bench.e2e_gpu", "H200",
                "`quail query` / `dbt build` beside the engine alone, random Qwen3-4B weights"),
    "gpu": ("bench.gpu_bench", "H200",
            "the engine vs transformers on filter and join, Qwen3-4B and 0.6B shapes"),
    "engine-cpu": ("bench.engine_cpu", "CPU",
                   "the engine vs plain transformers on the embedded default model"),
    "readme-cpu": ("bench.cpu_readme_main", "CPU",
                   "wall time of the README's main command, cold and warm"),
    "planner-cpu": ("bench.planner_cpu", "CPU", "a planned query vs the same query as written"),
    "accuracy": ("bench.accuracy", "CPU", "answer accuracy of the embedded models on reviews"),
    "pair-accuracy": ("bench.pair_accuracy", "CPU",
                      "two-argument questions and every example on the default model"),
    "fp8-emulation": ("bench.fp8_emulation", "CPU",
                      "fp8 GEMM decisions on trained weights, emulated"),
    "fp8-margins": ("bench.fp8_margins", "CPU", "fp8 per decision: float32 margins and shifts"),
    "batch-sensitivity": ("bench.batch_sensitivity", "CPU",
                          "yes/no decisions that flip when the same prompts batch differently"),
    "prefix-sharing": ("bench.prefix_sharing", "CPU/H200",
                       "agent-trace snapshots through `quail query`, prefix sharing on vs off"),
    "ray-scaling": ("bench.ray_scaling", "CPU",
                    "plain engine vs 1 and N Ray workers (--device cuda on the H200)"),
    "trust": ("bench.trust", "CPU",
              "decisions vs the float32 reference per precision, with and without the band"),
    "decode": ("bench.decode", "H200/CPU",
               "AI_COMPLETE through `quail query`: output tokens/s vs the decode speed of light "
               "and transformers"),
    "decode_band": ("bench.decode_band", "CPU",
                    "generated text: bf16's step-margin band vs float32, and texts with it"),
    "grammar": ("bench.grammar_decode", "CPU/H200",
                "decode tokens/s free vs under a JSON schema (constrained decoding)"),
    "injection": ("bench.injection", "CPU",
                  "how often an instruction inside a document flips its answer"),
    "multilabel": ("bench.multilabel", "CPU",
                   "multi-label classify: per-label precision/recall, exact sets, fp32"),
    "label_scoring": ("bench.label_scoring", "CPU",
                      "label sets whose case variants share a first token: teacher-forced vs "
                      "each label's own first tokens, accuracy on MedDRA organ classes, fp32"),
    "similarity": ("bench.similarity", "CPU",
                   "AI_SIMILARITY: paraphrases ranked above unrelated texts, both argument "
                   "orders, fp32"),
    "cold_start": ("bench.cold_start", "H200/CPU",
                   "the first query's model load on a fresh machine, before and after "
                   "`quail warmup` kept its GPU kernels"),
    "quailb": ("bench.quailb.run", "CPU",
               "QUAIL-B's 42 queries as Snowflake SQL, planned, tiny scale (--cpu)"),
}


def usage() -> str:
    rows = [f"  {name:<14} {machine:<5} {what}" for name, (_, machine, what) in SUITES.items()]
    return "usage: python -m bench <suite> [args]   (--help after a suite for its options)\n" \
        + "\n".join(rows)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in SUITES:
        print(usage())
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    suite, args = argv[0], argv[1:]
    sys.argv = [f"-m bench {suite}", *args]  # the command a suite records in its result
    return importlib.import_module(SUITES[suite][0]).main(args) or 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
