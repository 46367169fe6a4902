"""`interp list`, `info`, `build`, `verify`: the catalogue and the constructions."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandbox_lens.interp.cli.common import automaton_args, construction_args, load_automaton, parse_options
from sandbox_lens.interp.errors import OptionError, SandboxError
from sandbox_lens.interp.progress import wanted as progress_wanted
from sandbox_lens.interp.tasks.kinds import task_kind

__all__ = ["register"]


def register(sub) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Add this module's commands to the `interp` parser; return their handlers."""
    s = sub.add_parser("list", help="list constructions and catalogue automata")
    s.add_argument("--json", action="store_true", help="print JSON")

    s = sub.add_parser("info", help="describe an automaton and its transformation semigroup")
    automaton_args(s)
    s.add_argument("--json", action="store_true", help="print JSON")

    s = sub.add_parser(
        "decompose",
        help="the holonomy decomposition of an automaton as a cascade JSON file",
        description="Writes the automaton's holonomy cascade (permutation-reset levels, their wiring "
        "and the covering map, checked on every reachable product state) in the cascade "
        "JSON format that `--cascade-file` reads; refuses a non-solvable automaton.",
    )
    automaton_args(s)
    s.add_argument("--out", required=True, metavar="FILE.json", help="where to write the cascade")

    s = sub.add_parser("build", help="build a construction and save it (safetensors + JSON)")
    construction_args(s)
    s.add_argument("--out", required=True, metavar="DIR", help="output directory")
    s.add_argument(
        "--dtype",
        choices=["float32", "float64"],
        default="float32",
        help="weights' precision (float64 where a construction's float32 limit is below T)",
    )
    s.add_argument("--seed", type=int, default=0, help="dyck: seed of the balanced variant's random scores")
    s.add_argument(
        "--rotate",
        action="store_true",
        help="embed the residual stream in --pad more dimensions and rotate it at random: the same exact "
        "function with every variable spread over all coordinates (a known answer for alignment search)",
    )
    s.add_argument("--pad", type=int, metavar="N", help="--rotate: extra residual dimensions (default: d_model)")
    s.add_argument("--rotate-seed", type=int, default=0, metavar="S", help="--rotate: seed of the rotation")

    s = sub.add_parser("verify", help="build (or load) a construction and check it against exact simulation")
    construction_args(s, saved_model=True)
    s.add_argument(
        "--samples",
        type=int,
        default=None,
        help="random inputs: automaton words at the full length (default 1000); Dyck prefixes or FFL strings per band (default 200)",
    )
    s.add_argument(
        "--exhaustive-upto",
        type=int,
        default=None,
        metavar="K",
        help="check every word of length K (default: largest K with at most 4096 words, fewer for long-context models)",
    )
    s.add_argument(
        "--dtype",
        choices=["float32", "float64"],
        default="float32",
        help="weights' precision (float64 where a construction's float32 limit is below T)",
    )
    s.add_argument("--seed", type=int, default=0, help="seed of the random samples (dyck: also of the balanced scores)")
    s.add_argument(
        "--forward",
        choices=["bare", "model"],
        default="bare",
        help="bare: a plain PyTorch forward on the same weights (faster), cross-checked against the "
        "model on a sample of every input set; model: TransformerLens's forward throughout",
    )
    s.add_argument("--json", action="store_true", help="print one JSON object")

    return {
        "list": _cmd_list,
        "info": _cmd_info,
        "build": _cmd_build,
        "verify": _cmd_verify,
        "decompose": _cmd_decompose,
    }


def _cmd_decompose(args: argparse.Namespace) -> int:
    from sandbox_lens.interp.files import atomic_write
    from sandbox_lens.interp.tasks.holonomy_cascade import holonomy_cascade

    a = load_automaton(args)
    cascade = holonomy_cascade(a, progress=progress_wanted())  # refusals are one line, before anything is written
    out = Path(args.out)
    atomic_write(out, (json.dumps(cascade.to_dict(), indent=1, ensure_ascii=False) + "\n").encode())
    sizes = " × ".join(str(lv.automaton.n_states) for lv in cascade.levels)
    print(
        f"{a.name}: {len(cascade.levels)} holonomy level(s) ({sizes} values), covering checked on "
        f"{len(cascade.reachable())} reachable product states -> {out}"
    )
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    from sandbox_lens.constructions.registry import REGISTRY
    from sandbox_lens.interp.tasks.catalogue import CATALOGUE

    if args.json:
        print(
            json.dumps(
                {
                    "constructions": {n: e.describe() for n, e in REGISTRY.items()},
                    "automata": [{"name": e.pattern, "doc": e.doc, "examples": list(e.examples)} for e in CATALOGUE],
                },
                indent=2,
            )
        )
        return 0
    print("Constructions:")
    for name, e in REGISTRY.items():
        opts = [
            f"{n}={'|'.join(str(c) for c in o.choices if c != '') if o.choices else o.type.__name__}"
            for n, o in e.options.items()
            if o.cli and n != "seed"
        ]
        print(f"  {name:16s} {e.theorem:13s} {e.summary}" + (f" (options: {', '.join(opts)})" if opts else ""))
    print("\nAutomata (catalogue names):")
    for e in CATALOGUE:
        print(f"  {e.pattern:20s} {e.doc}  e.g. {', '.join(e.examples)}")
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    from sandbox_lens.constructions.krohn_rhodes import describe_path
    from sandbox_lens.interp.tasks.groups import transformation_semigroup

    a = load_automaton(args)
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
    holonomy = _holonomy_summary(a, sg)
    sizes = _construction_sizes(a)
    if args.json:
        print(
            json.dumps(
                {**info, "holonomy": holonomy, "sizes": sizes, "automaton": a.to_dict()}, indent=2, ensure_ascii=False
            )
        )
    else:
        for k, v in info.items():
            print(f"{k:15s} {v}")
            if k == "krohn_rhodes":  # the depth and size it will have, and the prefix scan's beside it
                for name, by_length in sizes.items():
                    for T, z in by_length.items():
                        print(
                            f"{'':15s} {name} at T={T}: {z['blocks']} block(s) ({z['attention']} with attention), "
                            f"d_model {z['d_model']}, {z['parameters']:,} parameters"
                        )
        if "refused" in holonomy:
            print(f"{'holonomy':15s} not computed: {holonomy['refused']}")
        else:
            print(
                f"{'holonomy':15s} {holonomy['levels']} level(s), {holonomy['images']} images in "
                f"{holonomy['classes']} subduction classes; solvable: {holonomy['solvable']}"
            )
            for c in holonomy["components"]:
                print(
                    f"{'':15s} level {c['height']}: image {{{', '.join(map(str, c['representative']))}}} "
                    f"({c['class_size']} equivalent), {c['tiles']} tiles, holonomy group {c['name']} (order {c['order']})"
                    f"{'' if c['solvable'] else ' (NOT solvable)'}"
                )
    return 0


def _construction_sizes(a, lengths: tuple[int, ...] = (64, 1024)) -> dict[str, dict[int, dict[str, int]]]:
    """The depth and size the ``krohn_rhodes`` construction (the path :func:`describe_path` names) and the prefix
    scan will have at each length: built as weights, not as a model (a few hundred ms); {} where refused."""
    from sandbox_lens.constructions.krohn_rhodes import build_krohn_rhodes
    from sandbox_lens.constructions.prefix_scan import build_prefix_scan
    from sandbox_lens.interp.model.hooked import parameter_count

    out: dict[str, dict[int, dict[str, int]]] = {}
    for name, build in (("krohn_rhodes", build_krohn_rhodes), ("prefix_scan", build_prefix_scan)):
        out[name] = {}
        for T in lengths:
            try:
                spec = build(a, T)
            except SandboxError:  # refused (not solvable, too large): the other lines say why
                out[name] = {}
                break
            out[name][T] = {
                "blocks": len(spec.blocks),
                "attention": sum(1 for b in spec.blocks if b.heads),
                "d_model": spec.d_model,
                "parameters": parameter_count(spec),
            }
    return out


def _holonomy_summary(a, sg) -> dict:
    """The holonomy skeleton (:mod:`sandbox_lens.interp.tasks.holonomy`) as JSON-able facts, or why it was not computed."""
    from sandbox_lens.interp.budget import BudgetError
    from sandbox_lens.interp.tasks.holonomy import holonomy_skeleton

    try:
        h = holonomy_skeleton(a, sg)
        components = [{k: (len(v) if k == "tiles" else v) for k, v in c.items() if k != "group"} for c in h.components]
        return {
            "levels": h.levels,
            "images": len(h.images),
            "classes": len(h.classes),
            "solvable": h.solvable,
            "components": components,
        }
    except BudgetError as e:
        return {"refused": str(e)}


def _build_spec(args: argparse.Namespace):
    """(what the construction is built from, its spec): the construction's task kind reads the source
    (``--automaton``, ``--dyck``, ...) and its task options (``-O q=...``); the rest are the construction's."""
    from sandbox_lens.constructions.registry import REGISTRY, build

    options = parse_options(args.option)
    entry = REGISTRY.get(args.construction)
    if entry is None:
        build(args.construction, None, args.length)  # refuses an unknown name in one line
    kind = task_kind(entry.takes)
    settable = (
        {n for n, o in entry.options.items() if o.cli} | set(entry.deprecated) | set(kind.construction_task_options)
    )
    hidden = sorted(set(options) - settable)
    if hidden:
        raise SandboxError(
            f"{args.construction}: unknown option(s) {', '.join(hidden)} "
            f"(allowed: {', '.join(sorted(settable)) or 'none'})"
        )
    if args.variant and "variant" not in entry.options:
        raise OptionError(f"--variant goes with the dyck construction, not {args.construction}")
    if getattr(args, "cascade_file", None) and "cascade" not in entry.options:
        raise OptionError("--cascade-file goes with the krohn_rhodes construction")
    hint = " (or --model DIR)" if hasattr(args, "model") else ""
    source = kind.construction_source(args.construction, {**vars(args), "_source_hint": hint}, options)
    if "variant" in entry.options:
        options.setdefault("variant", args.variant or entry.options["variant"].default)
    if "seed" in entry.options:
        options.setdefault("seed", args.seed)
    return source, build(args.construction, source, args.length, **options)


def _cmd_build(args: argparse.Namespace) -> int:
    from sandbox_lens.interp.model.bare import BareModel
    from sandbox_lens.interp.model.saved import save_model

    if not args.rotate and (args.pad is not None or args.rotate_seed):
        raise OptionError("--pad and --rotate-seed go with --rotate")
    if args.pad is not None and not 0 <= args.pad <= 4096:
        raise OptionError(f"--pad must lie in 0..4096, got {args.pad}")
    automaton, spec = _build_spec(args)
    if args.dtype not in spec.verified_dtypes:
        raise SandboxError(f"{spec.name} at length {args.length} is not exact in {args.dtype}; use --dtype float64")
    rotate = {"pad": spec.d_model if args.pad is None else args.pad, "seed": args.rotate_seed} if args.rotate else None
    if rotate is None:  # the weights TransformerLens would hold, saved without importing it (the same files)
        model: Any = BareModel(spec, dtype=args.dtype, sparse=False)
    else:  # rotating rounds differently: the saved model must still be exact
        from sandbox_lens.interp.model.hooked import to_hooked
        from sandbox_lens.interp.verify import verify

        model = to_hooked(spec, dtype=args.dtype, rotate=rotate)
        check = verify(model, samples=200, seed=rotate["seed"])
        if not check.exact:
            raise SandboxError(
                f"the rotated {spec.name} is not exact in {args.dtype} (accuracy {check.accuracy:.6f} "
                "on 200 samples); use --dtype float64 or a shorter --length"
            )
    from sandbox_lens.interp.files import claimed

    with claimed(Path(args.out)):  # not into a directory another process (a training run) is writing
        out = save_model(model, args.out)
    shape = spec.shape_summary()
    target = automaton.name if automaton is not None else "the flip-flop language"
    print(f"built {spec.name} for {target} (T ≤ {spec.max_length}, {args.dtype}) -> {out}")
    print("  " + ", ".join(f"{k}={v}" for k, v in shape.items()))
    if rotate is not None:
        print(
            f"  rotated: d_model {spec.d_model} + pad {rotate['pad']} = {model.cfg.d_model} (seed {rotate['seed']}); "
            "verified exact on 200 samples"
        )
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from sandbox_lens.interp.verify import verify

    if args.model:
        from sandbox_lens.interp.train import open_model

        if args.option:
            raise OptionError("--option applies when building; a saved model already has its options")
        target, automaton = open_model(args.model, expect_construction=args.construction), None
    else:
        if not args.construction or args.length is None:
            raise SandboxError("verify needs CONSTRUCTION and --length (or --model DIR)")
        source, target = _build_spec(args)
        # an automaton is checked against the one it was built from; a language travels with its spec
        accepts = task_kind(target.task).verify_accepts
        automaton = source if "automaton" in accepts else None
    r = verify(
        target,
        automaton,
        args.length,
        samples=args.samples,
        exhaustive_upto=args.exhaustive_upto,
        seed=args.seed,
        dtype=args.dtype,
        progress=progress_wanted(),
        forward=args.forward,
    )
    if args.json:
        print(json.dumps(r.to_dict()))
        return 0 if r.exact else 1
    verdict = "EXACT" if r.exact else "NOT EXACT"
    print(
        f"{verdict}: {r.construction} on {r.task}, T ≤ {r.length}, {r.dtype}: accuracy {r.accuracy:.6f} over "
        f"{r.checked} {r.checked_unit} ({r.sequences} inputs; exhaustive up to length {r.exhaustive_upto}, "
        f"{r.samples} sampled{' per band' if 'bands' in r.details else f' at T={r.length}'})"
    )
    if "max_tv" in r.details:
        print(
            f"  max total-variation distance to the exact next-token distribution {r.details['max_tv']:.2e} "
            f"({r.details['accuracy_rule']})"
        )
    for band, v in r.details.get("bands", {}).items():
        n = v.get("prefixes", v.get("reads"))
        extra = f", max TV {v['max_tv']:.2e}" if "max_tv" in v else ""
        accuracy = f"{v['accuracy']:.4f}" if n else "—"  # a band with nothing to score (no closing bracket yet)
        print(f"  {band:36s} accuracy {accuracy} ({n} {r.checked_unit}{extra})")
    print("  " + ", ".join(f"{k}={v}" for k, v in r.shape.items()))
    f = r.details["forward"]
    print(
        f"  forward: {f['path']}"
        + (
            f"; {f['cross_checked_positions']} positions cross-checked "
            f"(largest logit difference {f['max_logit_difference']:.1e})"
            if f["cross_checked_positions"]
            else ""
        )
    )
    for mm in r.mismatches:
        print(
            f"  mismatch at output {mm.position}: expected {mm.expected}, got {mm.predicted}; "
            f"after ...{' '.join(mm.inputs[-12:])}"
        )
    return 0 if r.exact else 1
