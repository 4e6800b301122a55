"""Grammar libraries for constrained decoding, compared on the same work: llguidance (the one
quail uses, infer/grammar.py), xgrammar, and outlines-core (the Rust core of Outlines).

Why: the issue that brought in llguidance asked to "compare the candidates on speed and install
size"; that comparison was never recorded. This probe measures, for each library importable in
the running environment (one that is not is skipped, saying so):

- compile: the time from a JSON schema (bench/grammar_decode.py SCHEMA and SHORT) to a matcher
  ready for its first mask, with the tokenizer in `--tokenizer DIR` (tokenizer.json; SmolLM2's,
  49,152 tokens), plus the time of that first mask. The tokenizer's own setup (llguidance's
  LLTokenizer, xgrammar's TokenizerInfo, outlines-core's Vocabulary) is timed apart: once per
  engine.
- per decode step, for a batch of `--batch` sequences (each its own matcher, all at the start of
  the object, then advanced through the tokens of PREFIX, a valid start of a SCHEMA answer): the
  time to compute the batch's allowed-token masks (packed 32 tokens to an int32, as quail copies
  them to the GPU) and the time to advance the batch by one token, with each library's batched
  API where it has one (llguidance: LLExecutor.unsafe_compute_mask_ptr / consume_token_par, as
  grammar.py; xgrammar: BatchGrammarMatcher.batch_fill_next_token_bitmask / batch_accept_token;
  outlines-core has none: Guide.write_mask_into / Guide.advance per sequence), single thread and
  the library's default threading. The median and the worst step over the prefix are reported,
  and the time to create the batch's fresh matchers.
- what quail needs of it: the schema's features (enum, "type": ["string", "null"],
  additionalProperties false, required) and the separators ", " and ": " forced with no free
  whitespace, each checked by feeding token sequences that must be accepted or refused.

Install sizes (wheels, site-packages) are measured outside Python: see
bench/results/grammar-libraries.md.

    python -m bench.probes.grammar_libraries --tokenizer DIR [--batch 256 1024] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from bench.grammar_decode import SCHEMA, SHORT

PREFIX = '{"product": "shoe", "sentiment": "positive", "summary": "good"'
# (name, text, whether the grammar must take every token of it, whether it must then be complete)
CHECKS = [
    ("valid answer", '{"product": "shoe", "sentiment": "positive", "summary": "good"}', True),
    ("nullable: null", '{"product": null, "sentiment": "mixed", "summary": "ok"}', True),
    ("enum: value outside", '{"product": null, "sentiment": "happy"', False),
    ("additionalProperties false", '{"product": null, "colour": "red"', False),
    ("required: closed early", '{"product": null}', False),
    ("separator ':' without space", '{"product":"shoe"', False),
    ("separator ',' without space", '{"product": "shoe","sentiment"', False),
    ("whitespace after '{'", '{ "product": "shoe"', False),
    ("space before ':'", '{"product" : "shoe"', False),
    ("newline between fields", '{"product": "shoe",\n"sentiment"', False),
]


def _now() -> float:
    return time.perf_counter()


def _bitmask(torch, n: int, words: int):
    return torch.zeros((n, words), dtype=torch.int32)


class Llguidance:
    name = "llguidance"

    def __init__(self, tokenizer_json: str, vocab: int, eos: int, threads: int | None):
        import llguidance

        self.ll = llguidance
        t0 = _now()
        self.tok = llguidance.LLTokenizer(tokenizer_json, n_vocab=vocab, eos_token=[eos])
        self.setup_s = _now() - t0
        self.executor = llguidance.LLExecutor(num_threads=threads)
        self.version = getattr(llguidance, "__version__", "?")

    def compile(self, schema: dict):
        style = {"item_separator": ", ", "key_separator": ": ", "whitespace_flexible": False}
        text = self.ll.LLMatcher.grammar_from_json_schema(json.dumps(schema), defaults=style)
        matcher = self.ll.LLMatcher(self.tok, text, log_level=0)
        if matcher.is_error():
            raise RuntimeError(matcher.get_error())
        return matcher

    def fresh(self, compiled, n: int) -> list:
        return [compiled.deep_copy() for _ in range(n)]

    def masks(self, states: list, buf) -> None:
        n, words = buf.shape
        self.executor.unsafe_compute_mask_ptr([(m, k) for k, m in enumerate(states)],
                                              buf.data_ptr(), words * 4, n)

    def advance(self, states: list, token: int) -> list[bool]:
        return self.executor.consume_token_par([(m, token) for m in states])


class Xgrammar:
    name = "xgrammar"

    def __init__(self, tokenizer_dir: str, vocab: int, eos: int, threads: int | None):
        import xgrammar
        from transformers import PreTrainedTokenizerFast

        self.xgr = xgrammar
        hf = PreTrainedTokenizerFast(tokenizer_file=str(Path(tokenizer_dir) / "tokenizer.json"))
        t0 = _now()
        info = xgrammar.TokenizerInfo.from_huggingface(hf, vocab_size=vocab, stop_token_ids=[eos])
        self.setup_s = _now() - t0
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=threads or 8,
                                                 cache_enabled=False)
        self.batch = xgrammar.BatchGrammarMatcher(max_threads=threads or "auto")
        self.threads = threads
        self.version = getattr(xgrammar, "__version__", "?")

    def compile(self, schema: dict):
        return self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=False,
                                                 separators=(", ", ": "), strict_mode=True)

    def fresh(self, compiled, n: int) -> list:
        return [self.xgr.GrammarMatcher(compiled) for _ in range(n)]

    def masks(self, states: list, buf) -> None:
        if self.threads == 1:
            for k, m in enumerate(states):
                m.fill_next_token_bitmask(buf, k)
        else:
            self.batch.batch_fill_next_token_bitmask(states, buf)

    def advance(self, states: list, token: int) -> list[bool]:
        if self.threads == 1:
            return [m.accept_token(token) for m in states]
        return self.xgr.BatchGrammarMatcher.batch_accept_token(states, [token] * len(states))


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, inverted: the character each byte is written as -> byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


class OutlinesCore:
    name = "outlines-core"
    WS = "(?:QUAILWS)"  # a marker in the regex, replaced to force ", " and ": "

    def __init__(self, tokenizer_json: str, vocab: int, eos: int, threads: int | None):
        import outlines_core

        self.oc = outlines_core
        data = json.loads(tokenizer_json)
        special = {t["id"] for t in data.get("added_tokens", []) if t.get("special")}
        decode = _byte_decoder()
        t0 = _now()
        table: dict[bytes, list[int]] = {}
        for text, tid in data["model"]["vocab"].items():
            if tid in special or tid >= vocab:
                continue
            table.setdefault(bytes(decode[c] for c in text), []).append(tid)
        self.vocab = outlines_core.Vocabulary(eos, table)
        self.setup_s = _now() - t0
        self.version = "?"

    def regex(self, schema: dict) -> str:
        from outlines_core.json_schema import build_regex_from_schema

        ws = self.WS
        regex = build_regex_from_schema(json.dumps(schema), whitespace_pattern=ws)
        # outlines-core puts the whitespace pattern on both sides of every ':' and ',' and
        # inside the braces; quail's ", " and ": " only by editing the regex
        return regex.replace(f"{ws}:{ws}", ": ").replace(f"{ws},{ws}", ", ").replace(ws, "")

    def compile(self, schema: dict):
        return self.oc.Index(self.regex(schema), self.vocab)

    def fresh(self, compiled, n: int) -> list:
        return [self.oc.Guide(compiled) for _ in range(n)]

    def masks(self, states: list, buf) -> None:
        words = buf.shape[1]
        base = buf.data_ptr()
        for k, g in enumerate(states):
            g.write_mask_into(base + k * words * 4, words, 4)

    def advance(self, states: list, token: int) -> list[bool]:
        out = []
        for g in states:
            try:
                g.advance(token, return_tokens=False)
                out.append(True)
            except Exception:  # a token the guide's state does not allow
                out.append(False)
        return out


def check(lib, compiled, tokens: list[int], eos: int) -> tuple[bool, bool]:
    """(every token taken, the grammar then complete) for one fresh state."""
    state = lib.fresh(compiled, 1)
    for t in tokens:
        if not all(lib.advance(state, t)):
            return False, False
    if lib.name == "xgrammar":
        return True, bool(state[0].accept_token(eos))
    if lib.name == "outlines-core":
        return True, bool(state[0].is_finished() or eos in state[0].get_tokens())
    return True, bool(state[0].is_accepting())


def step_times(lib, compiled, tokens: list[int], n: int, words: int, torch) -> dict:
    t0 = _now()
    states = lib.fresh(compiled, n)
    create_s = _now() - t0
    buf = _bitmask(torch, n, words)
    masks, advances, allowed = [], [], []
    for i in range(len(tokens) + 1):
        buf.zero_()
        t0 = _now()
        lib.masks(states, buf)
        masks.append(_now() - t0)
        if not torch.equal(buf, buf[:1].expand_as(buf)):
            raise RuntimeError(f"{lib.name}: the batch's masks differ (step {i})")
        row = buf[0].view(torch.uint8)
        allowed.append(int(sum(bin(b).count("1") for b in row.tolist())))
        if i == len(tokens):
            break
        t = tokens[i]
        if not (int(buf[0, t // 32]) >> (t % 32)) & 1:
            raise RuntimeError(f"{lib.name}: token {t} (step {i}) not in its own mask")
        t0 = _now()
        ok = lib.advance(states, t)
        advances.append(_now() - t0)
        if not all(ok):
            raise RuntimeError(f"{lib.name}: token {t} (step {i}) refused")
    return {"batch": n, "create_ms": create_s * 1e3,
            "mask_median_ms": statistics.median(masks) * 1e3, "mask_max_ms": max(masks) * 1e3,
            "mask_first_ms": masks[0] * 1e3,
            "advance_median_ms": statistics.median(advances) * 1e3,
            "advance_max_ms": max(advances) * 1e3, "allowed_row0": allowed,
            "mask_ms": [round(m * 1e3, 3) for m in masks]}


LIBRARIES = {"llguidance": Llguidance, "xgrammar": Xgrammar, "outlines-core": OutlinesCore}


def build(name: str, tokenizer_dir: str, tokenizer_json: str, vocab: int, eos: int,
          threads: int | None):
    cls = LIBRARIES[name]
    if name == "xgrammar":
        return cls(tokenizer_dir, vocab, eos, threads)
    return cls(tokenizer_json, vocab, eos, threads)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer", required=True, help="a directory with tokenizer.json")
    ap.add_argument("--batch", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--libraries", nargs="+", default=list(LIBRARIES))
    ap.add_argument("--threads", nargs="+", default=["1", "default"],
                    help="thread settings for the batched calls: a number or 'default'")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args(argv)

    import torch
    from tokenizers import Tokenizer

    path = Path(args.tokenizer) / "tokenizer.json"
    tokenizer_json = path.read_text()
    hf = Tokenizer.from_file(str(path))
    vocab = hf.get_vocab_size(with_added_tokens=True)
    config = Path(args.tokenizer) / "tokenizer_config.json"
    eos_text = json.loads(config.read_text()).get("eos_token") if config.exists() else None
    eos = hf.token_to_id(eos_text) if isinstance(eos_text, str) else 0
    words = (vocab + 31) // 32
    tokens = hf.encode(PREFIX, add_special_tokens=False).ids
    print(f"tokenizer {path} ({vocab} tokens, eos {eos}); {len(tokens)} prefix tokens; "
          f"{os.cpu_count()} CPUs; torch {torch.__version__}")
    results: dict = {"vocab": vocab, "prefix_tokens": len(tokens), "cpus": os.cpu_count(),
                     "libraries": {}}
    for name in args.libraries:
        try:
            t0 = _now()
            __import__({"outlines-core": "outlines_core"}.get(name, name))
            import_s = _now() - t0
        except ImportError as exc:
            print(f"\n{name}: not importable, skipped ({exc})")
            results["libraries"][name] = {"skipped": str(exc)}
            continue
        from importlib.metadata import version

        out = results["libraries"][name] = {
            "version": version(name.replace("-", "_")), "import_s": import_s, "runs": {}}
        print(f"\n== {name} {out['version']} (import {import_s:.2f} s)")
        for threads_arg in args.threads:
            threads = None if threads_arg == "default" else int(threads_arg)
            lib = build(name, args.tokenizer, tokenizer_json, vocab, eos, threads)
            run = out["runs"][threads_arg] = {"tokenizer_setup_s": lib.setup_s, "compile": {}}
            print(f"-- threads {threads_arg}: tokenizer setup {lib.setup_s:.2f} s")
            compiled = {}
            for label, schema in (("SCHEMA", SCHEMA), ("SHORT", SHORT)):
                t0 = _now()
                compiled[label] = lib.compile(schema)
                compile_s = _now() - t0
                state = lib.fresh(compiled[label], 1)
                buf = _bitmask(torch, 1, words)
                t0 = _now()
                lib.masks(state, buf)
                first_s = _now() - t0
                run["compile"][label] = {"compile_s": compile_s, "first_mask_ms": first_s * 1e3}
                print(f"   compile {label}: {compile_s * 1e3:.1f} ms, first mask "
                      f"{first_s * 1e3:.2f} ms")
            if threads_arg == args.threads[0]:
                out["checks"] = {}
                for cname, text, must_take in CHECKS:
                    taken, complete = check(lib, compiled["SCHEMA"],
                                            hf.encode(text, add_special_tokens=False).ids, eos)
                    ok = taken if must_take else not taken
                    out["checks"][cname] = {"taken": taken, "complete": complete, "as_needed": ok}
                    print(f"   check {cname!r}: taken={taken} complete={complete} "
                          f"{'OK' if ok else 'NOT AS QUAIL NEEDS'}")
            run["steps"] = []
            for n in args.batch:
                r = step_times(lib, compiled["SCHEMA"], tokens, n, words, torch)
                run["steps"].append(r)
                print(f"   batch {n}: create {r['create_ms']:.1f} ms; mask/step median "
                      f"{r['mask_median_ms']:.2f} ms, max {r['mask_max_ms']:.2f} ms "
                      f"(first {r['mask_first_ms']:.2f}); advance/step median "
                      f"{r['advance_median_ms']:.2f} ms, max {r['advance_max_ms']:.2f} ms")
            print(f"   allowed tokens per step (row 0): {run['steps'][0]['allowed_row0']}")
            print(f"   mask ms per step (batch {args.batch[-1]}): {run['steps'][-1]['mask_ms']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
