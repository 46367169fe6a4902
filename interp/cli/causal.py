"""`interp align`: where a model holds its task's state, causally (interchange interventions, DAS),
beside a random-init null and a construction of the same task."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

from interp.errors import SandboxError

__all__ = ["register"]


def register(sub) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Add this module's commands to the ``interp`` parser; returns {command: handler}."""
    s = sub.add_parser("align", help="causal alignment: where a model computes its task's state (interchange "
                                     "interventions, DAS), beside a random-init null and a construction",
                       description="Scans full interchange interventions over the residual stream, runs DAS at the "
                                   "best site over k with a matched random-subspace control, on held-out pairs; "
                                   "writes align.json and align.png.")
    s.add_argument("--run", metavar="DIR", help="a run directory of `interp train` (a trained twin)")
    s.add_argument("--model", metavar="DIR", help="a model saved by `interp build`")
    s.add_argument("--construction", metavar="NAME", help="also scan this construction of the model's task, at its length")
    s.add_argument("--high-level", default="parallel", choices=["parallel", "recurrent"],
                   help="how the state reaches the outputs: each output from the word (parallel) or carried forward")
    s.add_argument("--pairs", type=int, default=256, help="training pairs for DAS; as many again held out")
    s.add_argument("--k", default="1,2,4,8", help="DAS dimensions, comma-separated (default 1,2,4,8)")
    s.add_argument("--seed", type=int, default=0, help="seed of the pairs, the null and DAS")
    s.add_argument("--json", action="store_true", help="print a summary as one JSON object")
    s.add_argument("--out", required=True, metavar="DIR", help="output directory (align.json, align.png)")
    return {"align": _cmd_align}


def _cmd_align(args: argparse.Namespace) -> int:
    from interp.causal.align import align, high_level_of, null_of
    from interp.files import atomic_write, write_json
    from interp.viz import interchange_scans_png

    if bool(args.run) == bool(args.model):
        raise SandboxError("give one of --run DIR (a twin) or --model DIR (a saved construction)")
    if args.pairs < 8:
        raise SandboxError(f"--pairs must be ≥ 8, got {args.pairs}")
    try:
        ks = sorted({int(k) for k in args.k.split(",") if k})
    except ValueError:
        raise SandboxError(f"--k takes comma-separated integers, got {args.k!r}") from None
    if not ks or min(ks) < 1:
        raise SandboxError(f"--k needs positive dimensions, got {args.k!r}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise SandboxError(f"--out {out} is a file")
    from interp.train import open_model

    model = open_model(args.run or args.model)
    high_level_of(model, args.high_level)  # refuses other tasks and the LSTM before any work
    constructions = {args.construction: _construction(args.construction, model)} if args.construction else {}
    null = null_of(model, args.seed) if model.card.construction == "trained" else None
    result = align(model, constructions=constructions, null=null, mode=args.high_level, pairs=args.pairs, ks=ks,
                   seed=args.seed, progress=sys.stderr.isatty())
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "align.json", result)
    atomic_write(out / "align.png", interchange_scans_png(result))
    summary = {"first_sites": result["model"]["first_sites"], "ceiling": result["model"]["ceiling"],
               "das": [{"k": d["k"], "iia": d["iia"]["iia"], "random": d["random_subspace"]["iia"]} for d in result["das"]["k"]],
               "seconds": result["seconds"]}
    if args.json:
        print(json.dumps(summary))
        return 0
    print(f"state of {model.card.construction} ({args.high_level} model), first full-swap site reaching IIA 0.95 "
          f"per position: {result['model']['first_sites']}")
    for d in result["das"]["k"]:
        print(f"  DAS at {result['das']['hook']} position {result['das']['position']}, k = {d['k']}: IIA "
              f"{_f(d['iia']['iia'])} on changed held-out outputs (random {d['k']}-dim subspace: {_f(d['random_subspace']['iia'])})")
    if "null" in result:
        print(f"  null (random init): first sites {result['null']['first_sites']}")
    for name, r in result["constructions"].items():
        print(f"  {name}: first sites {r['first_sites']}")
        print(f"  verdict against {name}: {r['verdict']['verdict']} (rule: {r['verdict']['rule']})")
    print(f"  wrote {out / 'align.json'} and {out / 'align.png'} ({result['seconds']:.0f} s)")
    return 0


def _construction(name: str, model):
    from constructions.registry import REGISTRY, build
    from interp.errors import ConstructionError
    from interp.model.hooked import to_hooked

    entry = REGISTRY.get(name)
    if entry is None:
        build(name, None, 1)  # refuses an unknown name in one line
    if entry.takes != model.card.task_kind.name:
        raise ConstructionError(f"{name} models the {entry.takes} task, not this model's {model.card.task_kind.name} task")
    return to_hooked(build(name, model.card.source, int(model.card.options.get("trained_length") or model.card.max_length)))


def _f(x) -> str:
    return "—" if x is None else f"{x:.3f}"
