"""The ``interp`` command (also ``python -m interp``).

Every error a user can cause prints one line on stderr and exits with status 2; ``verify``
exits 1 when the model is not exact. Heavy imports (torch, TransformerLens) happen only in
the commands that build models, so ``interp list`` starts fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Sequence

from interp.errors import SandboxError

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit status 2 (argparse's default status)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _automaton_args(p: argparse.ArgumentParser, saved_model: bool = False, cascade: bool = False) -> None:
    # Constructions check for themselves (ffl needs no automaton); `info` always needs one.
    g = p.add_mutually_exclusive_group(required=not cascade)
    g.add_argument("--automaton", metavar="NAME", help="catalogue name (see `interp list`)")
    g.add_argument("--automaton-file", metavar="PATH", help="JSON automaton file (see README)")
    if cascade:
        g.add_argument("--cascade-file", metavar="PATH",
                       help="krohn_rhodes: a cascade JSON file (see README), simulated instead of an automaton")
        g.add_argument("--dyck", metavar="K,D", help="dyck: the language Dyck_{K,D} (K bracket types, depth ≤ D)")
    if saved_model:
        g.add_argument("--model", metavar="DIR", help="a model saved by `interp build` (instead of building one)")


def _construction_args(p: argparse.ArgumentParser, saved_model: bool = False) -> None:
    p.add_argument("construction", nargs="?" if saved_model else None, help="construction name (see `interp list`)")
    _automaton_args(p, saved_model, cascade=True)
    p.add_argument("--length", "-T", type=int, required=not saved_model, metavar="T",
                   help="maximum input length" + (" (with --model: defaults to the model's)" if saved_model else ""))
    p.add_argument("--option", "-O", action="append", default=[], metavar="KEY=VALUE",
                   help="construction option, e.g. -O code=circle (repeatable)")
    p.add_argument("--variant", choices=["stack", "uniform", "balanced"], help="dyck: the second layer's attention")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="interp", description="sandbox-lens: exact transformer constructions for automata.")
    p.add_argument("--threads", type=int, metavar="N",
                   help="torch CPU threads (default: torch's choice; small models on a busy machine often run "
                        "several times faster with 1)")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("list", help="list constructions and catalogue automata")
    s.add_argument("--json", action="store_true", help="print JSON")

    s = sub.add_parser("info", help="describe an automaton and its transformation semigroup")
    _automaton_args(s)
    s.add_argument("--json", action="store_true", help="print JSON")

    s = sub.add_parser("build", help="build a construction and save it (safetensors + JSON)")
    _construction_args(s)
    s.add_argument("--out", required=True, metavar="DIR", help="output directory")
    s.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    s.add_argument("--seed", type=int, default=0, help="dyck: seed of the balanced variant's random scores")

    s = sub.add_parser("verify", help="build (or load) a construction and check it against exact simulation")
    _construction_args(s, saved_model=True)
    s.add_argument("--samples", type=int, default=None,
                   help="random inputs: automaton words at the full length (default 1000); Dyck prefixes or FFL strings per band (default 200)")
    s.add_argument("--exhaustive-upto", type=int, default=None, metavar="K",
                   help="check every word of length K (default: largest K with at most 4096 words, fewer for long-context models)")
    s.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    s.add_argument("--seed", type=int, default=0, help="seed of the random samples (dyck: also of the balanced scores)")
    s.add_argument("--json", action="store_true", help="print one JSON object")

    s = sub.add_parser("train", help="train a HookedTransformer on a task (checkpoints, resume, replicates)")
    s.add_argument("task", choices=["automaton", "dyck", "ffl", "flipflop"],
                   help="automaton, dyck or ffl (the flip-flop language; `flipflop` is its old name)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--automaton", metavar="NAME", help="automaton task: catalogue name")
    g.add_argument("--automaton-file", metavar="PATH", help="automaton task: JSON automaton file")
    g.add_argument("--dyck", metavar="K,D", help="dyck task: Dyck_{K,D}")
    g.add_argument("--ffl", "--flipflop", dest="ffl", metavar="P[,P...]",
                   help="ffl task: FFL(P), P = p_i (default 0.8); several: a mixture, e.g. 0.9,0.98,0.1")
    s.add_argument("--length", "-T", type=int, help="sequence length (defaults: automaton 32, dyck 28, ffl 64)")
    s.add_argument("--q", type=float, default=0.5, help="dyck: probability of an open bracket")
    s.add_argument("--layers", type=int), s.add_argument("--d-model", type=int), s.add_argument("--heads", type=int)
    s.add_argument("--d-head", type=int), s.add_argument("--d-mlp", type=int)
    s.add_argument("--norm", choices=["LN", "none"])
    s.add_argument("--pos", choices=["learned", "sinusoidal", "none", "linear"],
                   help="position embedding (default learned; the others are fixed, so longer inputs can be evaluated)")
    s.add_argument("--arch", choices=["transformer", "lstm"], default="transformer",
                   help="transformer (a HookedTransformer) or the thesis's LSTM baseline (embedding 64, hidden 128, 1 layer)")
    s.add_argument("--hidden", type=int, metavar="H", help="lstm: hidden width (default 128)")
    s.add_argument("--n-ctx", type=int, metavar="N",
                   help="model context (default: the training length's); larger, with --pos other than learned, "
                        "lets `interp evaluate --length` go past the training length")
    s.add_argument("--steps", type=int, default=2000), s.add_argument("--batch", type=int, default=32)
    s.add_argument("--lr", type=float, default=1e-3), s.add_argument("--weight-decay", type=float, default=0.01)
    s.add_argument("--warmup", type=int, default=100), s.add_argument("--clip", type=float, default=1.0)
    s.add_argument("--schedule", choices=["cosine", "linear"], default="cosine")
    s.add_argument("--eval-every", type=int, default=100), s.add_argument("--eval-size", type=int, default=512)
    s.add_argument("--dropout", type=float, default=0.0, help="dropout on every block's attention and MLP output")
    s.add_argument("--embed-dropout", type=float, default=0.0, help="dropout on the embeddings")
    s.add_argument("--sharpen", type=float, default=0.0, metavar="λ",
                   help="attention sharpening: λ × mean attention entropy (nats) added to the loss")
    s.add_argument("--ema", type=float, default=0.0, metavar="γ",
                   help="keep and evaluate a moving average of the weights with decay γ (the thesis: 0.9)")
    s.add_argument("--target", type=float, metavar="ACC", help="stop once held-out accuracy reaches ACC")
    s.add_argument("--max-minutes", type=float, metavar="M", help="time budget per run (a checkpoint is kept)")
    s.add_argument("--seeds", default="0", metavar="RANGE", help="seeds, e.g. 0, 0-9 or 1,3,5 (several: a process pool)")
    s.add_argument("--workers", type=int,
                   help="several runs: processes of the local pool, or CPUs of a local Ray runtime (default: CPU cores)")
    s.add_argument("--grid", nargs="+", default=[], metavar="KEY=V1,V2",
                   help="a sweep over settings, e.g. lr=1e-3,3e-3 layers=1,2 (one run directory per cell and seed)")
    s.add_argument("--backend", choices=["local", "ray"], default="local",
                   help="several runs: a local process pool, or Ray tasks (a local runtime, or the cluster in RAY_ADDRESS)")
    s.add_argument("--resume", action="store_true",
                   help="one run: continue it from its checkpoint (sweeps always skip finished runs and resume the rest)")
    s.add_argument("--out", required=True, metavar="DIR")

    s = sub.add_parser("compare", help="constructed vs trained circuits on one task: report.html + metrics.json")
    s.add_argument("task", metavar="TASK", help="dyck, ffl (the flip-flop language), or a catalogue automaton (e.g. parity, grid9, C3, flipflop)")
    s.add_argument("--construction", nargs="+", metavar="NAME",
                   help="constructions to compare (dyck: stack uniform balanced; automata: registry names; default: all that apply)")
    s.add_argument("--dyck", default="2,4", metavar="K,D", help="dyck: the language (default 2,4)")
    s.add_argument("--ffl", type=float, default=0.8, metavar="P", help="ffl: the language FFL(P), P = p_i (default 0.8)")
    s.add_argument("--length", "-T", type=int, help="length (defaults: dyck 28, ffl 64 = the FFL string, automata 16)")
    s.add_argument("--trained", metavar="DIR", help="a run directory of `interp train` on the same task (default: train a twin in OUT/twin)")
    s.add_argument("--samples", type=int, default=200, help="sampled words for probes, ablation and pruning")
    s.add_argument("--examples", type=int, default=20, help="example words for the attention scores")
    s.add_argument("--train-minutes", type=float, default=5.0, help="time budget when the twin is trained here")
    s.add_argument("--mask-steps", type=int, default=150, help="steps of learned head masks (0: skip)")
    s.add_argument("--mask-sparsity", type=float, nargs="+", default=[0.1, 0.3, 1.0], metavar="λ",
                   help="L0 penalties of the learned head masks, nats per open head (default 0.1 0.3 1)")
    s.add_argument("--theorem3-steps", type=int, default=1000, help="dyck: steps of the random-network weight mask (0: skip)")
    s.add_argument("--corollary3-steps", type=int, default=400,
                   help="dyck: steps of the two-target mask with one shared matrix (0: skip)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", required=True, metavar="DIR")

    s = sub.add_parser("evaluate", help="a twin or a model under distribution and length shifts, beside the exact construction")
    s.add_argument("run", nargs="?", metavar="RUN_DIR", help="a run directory of `interp train`")
    s.add_argument("--model", metavar="DIR", help="a model saved by `interp build` (instead of RUN_DIR)")
    s.add_argument("--probs", nargs="+", metavar="P", default=[],
                   help="automata: symbol distributions, each comma-separated over the alphabet (e.g. 0.95,0.05)")
    s.add_argument("--counts", nargs="+", type=int, metavar="N", default=[],
                   help="automata: words with exactly N occurrences of --count-symbol (e.g. 0 2 14 16)")
    s.add_argument("--count-symbol", metavar="SYM", help="automata: the symbol --counts counts (default: the second)")
    s.add_argument("--length", "-T", type=int, help="input length (default: the training length)")
    s.add_argument("--ffl", metavar="P,P,...", help="ffl: the ignore probabilities p of FFL(p) (default 0.8,0.98,0.1)")
    s.add_argument("--bands", nargs="+", metavar="LO-HI", help="dyck: length bands (default: as `verify dyck`)")
    s.add_argument("--q", nargs="+", type=float, default=[], metavar="Q", help="dyck: other open-bracket probabilities")
    s.add_argument("--samples", type=int, default=500, help="inputs per shift (default 500)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--no-skyline", action="store_true", help="leave out the exact construction's rows")
    s.add_argument("--json", action="store_true", help="print one JSON object (rows: one per model and shift)")
    s.add_argument("--out", metavar="FILE.json", help="also write that object to FILE.json")

    s = sub.add_parser("population", help="how the seeds of a sweep agree: attention variation, references, probes")
    s.add_argument("directory", metavar="DIR", help="the --out directory of `interp train --seeds ... [--grid ...]`")
    s.add_argument("--samples", type=int, default=64, help="words for the probes and reference scores (default 64)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.add_argument("--out", metavar="FILE.json", help="also write that object to FILE.json")

    s = sub.add_parser("report", help="rebuild report.html of `interp compare` from its files (no model run)")
    s.add_argument("directory", metavar="DIR", help="the --out directory of `interp compare`")

    s = sub.add_parser("demo", help="build, verify and draw the prefix scan for parity and S5")
    s.add_argument("--out", default="reports/demo", metavar="DIR")
    s.add_argument("--samples", type=int, default=500)
    return p


def _parse_options(pairs: Sequence[str]) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SandboxError(f"option {pair!r} must look like KEY=VALUE")
        opts[key.replace("-", "_")] = _number(value)
    return opts


def _number(value: str) -> Any:
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


def _load_automaton(args: argparse.Namespace):
    if args.automaton_file:
        from interp.tasks.automata import load_automaton_file

        return load_automaton_file(args.automaton_file)
    from interp.tasks.catalogue import get_automaton

    return get_automaton(args.automaton)


def _cmd_list(args: argparse.Namespace) -> int:
    from constructions.registry import REGISTRY
    from interp.tasks.catalogue import CATALOGUE

    if args.json:
        print(json.dumps({
            "constructions": {n: e.describe() for n, e in REGISTRY.items()},
            "automata": [{"name": e.pattern, "doc": e.doc, "examples": list(e.examples)} for e in CATALOGUE],
        }, indent=2))
        return 0
    print("Constructions:")
    for name, e in REGISTRY.items():
        opts = [f"{n}={'|'.join(map(str, o.choices)) if o.choices else o.type.__name__}" for n, o in e.options.items()
                if o.cli and n != "seed"]
        print(f"  {name:16s} {e.theorem:13s} {e.summary}" + (f" (options: {', '.join(opts)})" if opts else ""))
    print("\nAutomata (catalogue names):")
    for e in CATALOGUE:
        print(f"  {e.pattern:20s} {e.doc}  e.g. {', '.join(e.examples)}")
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    from constructions.krohn_rhodes import describe_path
    from interp.tasks.groups import transformation_semigroup

    a = _load_automaton(args)
    sg = transformation_semigroup(a)
    info = {
        "name": a.name,
        "states": a.n_states,
        "symbols": a.n_symbols,
        "initial": a.states[a.initial],
        "description": a.description,
        "semigroup_size": sg.size,
        "is_group": sg.is_group,
        "group_order": sg.group_order,
        "solvable": sg.is_solvable,
        "krohn_rhodes": describe_path(a),
    }
    if args.json:
        print(json.dumps({**info, "automaton": a.to_dict()}, indent=2, ensure_ascii=False))
    else:
        for k, v in info.items():
            print(f"{k:15s} {v}")
    return 0


def _build_spec(args: argparse.Namespace):
    from constructions.registry import REGISTRY, build

    options = _parse_options(args.option)
    entry = REGISTRY.get(args.construction)
    if entry is not None:
        settable = {n for n, o in entry.options.items() if o.cli} | set(entry.deprecated) | ({"q"} if entry.takes == "dyck" else set())
        hidden = sorted(set(options) - settable)
        if hidden:
            raise SandboxError(f"{args.construction}: unknown option(s) {', '.join(hidden)} "
                               f"(allowed: {', '.join(sorted(settable)) or 'none'})")
    sources = [a for a in ("automaton", "automaton_file", "cascade_file", "dyck") if getattr(args, a, None)]
    if args.variant and args.construction != "dyck":
        raise SandboxError("--variant goes with the dyck construction")
    if entry is not None and entry.takes == "ffl":
        if sources:
            raise SandboxError(f"the {args.construction} construction models the flip-flop language and takes no automaton "
                               "(for the flip-flop automaton: `memory --automaton flipflop`)")
        return None, build(args.construction, None, args.length, **options)
    if not sources:
        raise SandboxError("one of --automaton NAME, --automaton-file PATH, --cascade-file PATH, --dyck K,D is required"
                           + (" (or --model DIR)" if hasattr(args, "model") else ""))
    if getattr(args, "dyck", None) or (entry is not None and entry.takes == "dyck"):
        from interp.tasks.dyck import Dyck, parse_dyck_spec

        if entry is None or entry.takes != "dyck" or not args.dyck:
            raise SandboxError("the dyck construction needs --dyck K,D (and --dyck goes only with dyck)")
        k, D = parse_dyck_spec(args.dyck)
        try:
            q = float(options.pop("q", 0.5))
        except ValueError:
            raise SandboxError("dyck: option q must be a number in (0, 1)") from None
        lang = Dyck(k, D, q)
        options.setdefault("variant", args.variant or "stack")
        options.setdefault("seed", args.seed)
        return lang, build(args.construction, lang, args.length, **options)
    if args.cascade_file:
        from interp.tasks.cascade import load_cascade_file

        if args.construction != "krohn_rhodes":
            raise SandboxError("--cascade-file goes with the krohn_rhodes construction")
        options["cascade"] = load_cascade_file(args.cascade_file)
        automaton = options["cascade"].automaton()
    else:
        automaton = _load_automaton(args)
    return automaton, build(args.construction, automaton, args.length, **options)


def _cmd_build(args: argparse.Namespace) -> int:
    from interp.model.hooked import to_hooked
    from interp.model.saved import save_model

    automaton, spec = _build_spec(args)
    if args.dtype not in spec.verified_dtypes:
        raise SandboxError(f"{spec.name} at length {args.length} is not exact in {args.dtype}; use --dtype float64")
    out = save_model(to_hooked(spec, dtype=args.dtype), args.out)
    shape = spec.shape_summary()
    target = automaton.name if automaton is not None else "the flip-flop language"
    print(f"built {spec.name} for {target} (T ≤ {spec.max_length}, {args.dtype}) -> {out}")
    print("  " + ", ".join(f"{k}={v}" for k, v in shape.items()))
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from interp.verify import verify

    if args.model:
        from interp.model.saved import load_model

        if args.option:
            raise SandboxError("--option applies when building; a saved model already has its options")
        target, automaton = load_model(args.model, expect_construction=args.construction), None
    else:
        if not args.construction or args.length is None:
            raise SandboxError("verify needs CONSTRUCTION and --length (or --model DIR)")
        source, target = _build_spec(args)
        automaton = source if target.task["kind"] == "automaton" else None  # a language travels with its spec
    r = verify(target, automaton, args.length, samples=args.samples, exhaustive_upto=args.exhaustive_upto,
               seed=args.seed, dtype=args.dtype, progress=sys.stderr.isatty())
    if args.json:
        print(json.dumps(r.to_dict()))
        return 0 if r.exact else 1
    verdict = "EXACT" if r.exact else "NOT EXACT"
    print(f"{verdict}: {r.construction} on {r.task}, T ≤ {r.length}, {r.dtype}: accuracy {r.accuracy:.6f} over "
          f"{r.checked} {r.checked_unit} ({r.sequences} inputs; exhaustive up to length {r.exhaustive_upto}, "
          f"{r.samples} sampled{' per band' if r.kind != 'automaton' else f' at T={r.length}'})")
    if "max_tv" in r.details:
        print(f"  max total-variation distance to the exact next-token distribution {r.details['max_tv']:.2e} "
              f"({r.details['accuracy_rule']})")
    for band, v in r.details.get("bands", {}).items():
        n = v.get("prefixes", v.get("reads"))
        extra = f", max TV {v['max_tv']:.2e}" if "max_tv" in v else ""
        print(f"  {band:36s} accuracy {v['accuracy']:.4f} ({n} {r.checked_unit}{extra})")
    print("  " + ", ".join(f"{k}={v}" for k, v in r.shape.items()))
    for mm in r.mismatches:
        print(f"  mismatch at output {mm.position}: expected {mm.expected}, got {mm.predicted}; "
              f"after ...{' '.join(mm.inputs[-12:])}")
    return 0 if r.exact else 1


def _parse_seeds(text: str) -> list[int]:
    seeds: list[int] = []
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise SandboxError(f"--seeds expects numbers and ranges like 0-9 or 1,3,5; got {text!r}")
        seeds += list(range(int(lo), int(hi) + 1)) if sep else [int(lo)]
    if not seeds or len(seeds) > 1000:
        raise SandboxError(f"--seeds must name between 1 and 1000 seeds; got {text!r}")
    return seeds


def _training_task(args: argparse.Namespace):
    from interp.tasks.batches import AutomatonTask, DyckTask, FFLTask

    if args.task == "flipflop":
        warnings.warn("`interp train flipflop` is now `interp train ffl` (the flip-flop language)", FutureWarning)
        args.task = "ffl"
    if args.task == "automaton":
        if not (args.automaton or args.automaton_file):
            raise SandboxError("train automaton needs --automaton NAME or --automaton-file PATH")
        return AutomatonTask(_load_automaton(args), args.length or 32)
    if args.automaton or args.automaton_file:
        raise SandboxError(f"--automaton goes with `train automaton`, not `train {args.task}`")
    if args.task == "dyck":
        from interp.tasks.dyck import Dyck, parse_dyck_spec

        if not args.dyck or args.ffl is not None:
            raise SandboxError("train dyck needs --dyck K,D")
        k, D = parse_dyck_spec(args.dyck)
        return DyckTask(Dyck(k, D, args.q), args.length or 28)
    if args.dyck:
        raise SandboxError("--dyck goes with `train dyck`")
    if args.ffl is None:
        return FFLTask(0.8, args.length or 64)
    try:
        ps = [float(x) for x in args.ffl.split(",")]
    except ValueError:
        raise SandboxError(f"--ffl takes probabilities separated by commas, got {args.ffl!r}") from None
    return FFLTask(ps if len(ps) > 1 else ps[0], args.length or 64)


def _cmd_train(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from interp.train import TrainConfig, default_shape

    task = _training_task(args)
    base = default_shape(task, args.arch)
    if args.arch == "lstm" and any(getattr(args, k) is not None for k in ("heads", "d_head", "d_mlp", "norm", "pos", "n_ctx")):
        raise SandboxError("--heads, --d-head, --d-mlp, --norm, --pos and --n-ctx describe a transformer; "
                           "an LSTM takes --layers, --d-model (embedding) and --hidden")
    shape = replace(base, **{k: v for k, v in {
        "n_layers": args.layers, "d_model": args.d_model, "n_heads": args.heads, "d_head": args.d_head,
        "d_mlp": args.d_mlp, "normalization": args.norm, "positional": args.pos, "n_ctx": args.n_ctx,
        "hidden": args.hidden}.items()
        if v is not None})
    config = TrainConfig(steps=args.steps, batch=args.batch, lr=args.lr, weight_decay=args.weight_decay,
                         warmup=args.warmup, schedule=args.schedule, clip=args.clip, eval_every=args.eval_every,
                         eval_size=args.eval_size, target_accuracy=args.target, max_minutes=args.max_minutes,
                         dropout=args.dropout, embed_dropout=args.embed_dropout, sharpen=args.sharpen, ema=args.ema)
    seeds = _parse_seeds(args.seeds)
    out = Path(args.out)
    if len(seeds) == 1 and not args.grid and args.backend == "local":
        from interp.train import train

        m = train(task, shape, replace(config, seed=seeds[0]), out, resume=args.resume, progress=sys.stderr.isatty())
        print(f"{task.name}: final accuracy {m['final_accuracy']:.4f}, best {m['best_accuracy']:.4f} after "
              f"{m['steps']} steps, {m['wall_seconds'] / 60:.1f} min (stopped by {m['stopped_by']}) -> {out / 'metrics.json'}")
        return 0
    from interp.sweep import parse_grid, run_sweep

    s = run_sweep(task, shape, config, out, seeds, grid=parse_grid(args.grid), backend=args.backend,
                  workers=args.workers, progress=sys.stderr.isatty())
    runs = len(s["runs"])
    print(f"{task.name}: {len(s['cells'])} cell(s) × {len(seeds)} seed(s), {s['trained_now']} of {runs} runs trained now; "
          f"best accuracy {s['best_accuracy']:.4f}, median {s['median_best_accuracy']:.4f} -> {out / 'summary.json'}")
    for c in s["cells"] if len(s["cells"]) > 1 else []:
        print(f"  {c['cell']:40s} best {c['best_accuracy']:.4f}  median {c['median_best_accuracy']:.4f}  "
              f"at target {c['runs_at_target']}/{len(seeds)}")
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from interp.compare.analyse import compare, comparison_for
    from interp.tasks.dyck import parse_dyck_spec

    if args.task != "dyck" and args.dyck != "2,4":
        raise SandboxError("--dyck goes with `compare dyck`")
    if args.task != "ffl" and args.ffl != 0.8:
        raise SandboxError("--ffl goes with `compare ffl`")
    comparison = comparison_for(args.task, dyck=parse_dyck_spec(args.dyck), length=args.length, ffl=args.ffl)
    report = compare(comparison, Path(args.out), constructions=args.construction, trained=args.trained,
                     samples=args.samples, examples=args.examples, train_minutes=args.train_minutes,
                     masks=args.mask_steps > 0, mask_steps=max(1, args.mask_steps),
                     mask_sparsities=args.mask_sparsity, theorem3_steps=args.theorem3_steps,
                     corollary3_steps=args.corollary3_steps,
                     seed=args.seed, progress=sys.stderr.isatty())
    print(f"report: {report}")
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from interp.evaluate import automaton_shifts, dyck_shifts, evaluate, ffl_shifts, parse_probs, skyline, task_of
    from interp.files import atomic_write

    if bool(args.run) == bool(args.model):
        raise SandboxError("evaluate needs a run directory of `interp train` or --model DIR (one of them)")
    if args.model:
        from interp.model.saved import load_model

        model, name = load_model(args.model), None
        name = model.card.construction
    else:
        from interp.train import load_trained

        model, name = load_trained(args.run), "twin"
    kind, source = task_of(model)
    card = model.card
    trained = card.options.get("trained_length", card.max_length)
    default_length = min(trained, model.cfg.n_ctx - len(card.io.prefix))
    length = default_length if args.length is None else args.length
    given = {"automaton": ("probs", "counts", "count_symbol"), "ffl": ("ffl",), "dyck": ("bands", "q")}
    for other, opts in given.items():
        for opt in opts if other != kind else ():
            if getattr(args, opt):
                raise SandboxError(f"--{opt.replace('_', '-')} applies to {other} models; this one models {kind}")
    if kind == "automaton":
        sym = 1 if source.n_symbols > 1 else 0
        if args.count_symbol is not None:
            if args.count_symbol not in source.alphabet:
                raise SandboxError(f"--count-symbol {args.count_symbol!r} is not a symbol of {source.name} "
                                   f"({', '.join(source.alphabet)})")
            sym = source.alphabet.index(args.count_symbol)
        shifts = automaton_shifts(source, length, [parse_probs(p, source.n_symbols) for p in args.probs],
                                  args.counts, sym)
    elif kind == "ffl":
        try:
            ps = [float(x) for x in args.ffl.split(",")] if args.ffl else [0.8, 0.98, 0.1]
        except ValueError:
            raise SandboxError(f"--ffl takes comma-separated probabilities, got {args.ffl!r}") from None
        shifts = ffl_shifts(length, ps)
    else:
        from interp.verify.dyck import default_bands

        if args.bands:
            bands = []
            for b in args.bands:
                lo, sep, hi = b.partition("-")
                if not (lo.isdigit() and hi.isdigit() and sep):
                    raise SandboxError(f"--bands takes LO-HI, got {b!r}")
                bands.append((int(lo), int(hi)))
        else:
            bands = default_bands(length)
        shifts = dyck_shifts(source, bands, args.q)
    models = {name: model}
    if not args.no_skyline:
        top = max(s.length() for s in shifts)
        exact = skyline(model, top)
        if exact is not None:
            models[f"{exact.card.construction} (exact)"] = exact
    rows = evaluate(models, shifts, samples=args.samples, seed=args.seed, progress=sys.stderr.isatty())
    result = {"source": str(args.run or args.model), "kind": kind, "task": card.task, "samples": args.samples,
              "seed": args.seed, "rows": rows}
    if args.out:
        out = Path(args.out)
        if out.is_dir():
            raise SandboxError(f"--out {out} is a directory; give a file name")
        if not out.parent.is_dir():
            raise SandboxError(f"--out: folder {out.parent} does not exist")
        atomic_write(out, (json.dumps(result, indent=1) + "\n").encode())
    if args.json:
        print(json.dumps(result))
        return 0
    width = max(len(r["shift"]) for r in rows)
    print(f"{'model':28s} {'shift':{width}s} {'accuracy':>9s} {'final':>7s}" + ("  string errors" if kind == "ffl" else ""))
    for r in rows:
        extra = f"  {r['strings_with_error']}/{r['inputs']}" if kind == "ffl" else ""
        print(f"{r['model'][:28]:28s} {r['shift']:{width}s} {r['accuracy']:9.4f} {r['final_accuracy']:7.4f}{extra}")
    return 0


def _cmd_population(args: argparse.Namespace) -> int:
    from interp.compare.population import population

    if args.samples < 8:
        raise SandboxError("--samples must be ≥ 8 (the probes split them into train and test)")
    result = population(Path(args.directory), samples=args.samples, seed=args.seed, out=args.out)
    if args.json:
        print(json.dumps(result))
        return 0
    for name, cell in result["cells"].items():
        print(f"{name}: {len(cell['runs'])} runs" + (f" — {cell['skipped']}" if "skipped" in cell else ""))
        if "skipped" in cell:
            continue
        print(f"  probe input: {cell['probe_text']}  (random causal patterns: {cell['random_baseline']:.2f})")
        for head, v in cell["attention_variation"].items():
            refs = cell["best_reference"].get(head, {})
            common = max(refs, key=lambda r: refs[r]["heads"]) if refs else "—"
            print(f"  {head:6s} variation between seeds {v['mean']:.2f} ({v['ratio_to_random']:.2f} × random); "
                  f"closest reference: {common} in {refs.get(common, {}).get('heads', 0)} of {len(cell['seeds'])} seeds")
        for latent, p in cell["probes"].items():
            print(f"  probe {latent}: median {p['median']:.3f} (min {p['min']:.3f}, max {p['max']:.3f})")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from interp.compare.report import write_report

    print(f"report: {write_report(Path(args.directory))}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from interp.demo import run_demo

    path = run_demo(Path(args.out), samples=args.samples)
    print(f"report: {path}")
    return 0


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"interp: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler = {"list": _cmd_list, "info": _cmd_info, "build": _cmd_build, "verify": _cmd_verify, "demo": _cmd_demo,
               "train": _cmd_train, "compare": _cmd_compare, "report": _cmd_report,
               "evaluate": _cmd_evaluate, "population": _cmd_population}[args.command]
    warnings.showwarning = _one_line_warning
    if args.threads is not None:
        if args.threads < 1:
            print("interp: error: --threads must be ≥ 1", file=sys.stderr)
            return 2
        import torch

        torch.set_num_threads(args.threads)
    try:
        return handler(args)
    except SandboxError as e:
        print(f"interp: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interp: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `interp list | head`: the reader left, nothing to report
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - keep Python's exit flush quiet
        return 0
