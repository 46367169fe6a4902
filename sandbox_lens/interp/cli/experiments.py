"""`interp experiment`: the thesis's learning claims, one command each."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from sandbox_lens.interp.errors import OptionError, SandboxError
from sandbox_lens.interp.progress import wanted as progress_wanted

__all__ = ["register"]


def register(sub) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Add this module's commands to the ``interp`` parser; returns {command: handler}."""
    s = sub.add_parser(
        "experiment",
        help="reproduce a learning claim of the thesis (`interp experiment list`)",
        description="Reproduce one of the thesis's learning claims: train populations, evaluate them "
        "beside the exact construction, write results.json and report.html.",
    )
    s.add_argument(
        "name",
        metavar="NAME",
        help="an experiment (see `interp experiment list`), `list`, `all` "
        "(every experiment into OUT/<name>, and OUT/index.html), or `publish` "
        "(commit the full runs under OUT/<name>, every experiment there: --to DIR, --docs PAGE)",
    )
    s.add_argument("--out", metavar="DIR", help="the experiment's directory (rerunning reuses finished runs)")
    s.add_argument(
        "--quick", action="store_true", help="a seconds-to-a-minute version (tests the pipeline, not the claim)"
    )
    s.add_argument("--seeds", metavar="RANGE", help="seeds instead of the experiment's defaults, e.g. 0-4 or 1,3")
    s.add_argument(
        "--backend",
        choices=["local", "ray"],
        default="local",
        help="train the populations on a local process pool or on Ray (default local)",
    )
    s.add_argument("--workers", type=int, metavar="N", help="local processes or Ray CPUs (default: CPU cores)")
    s.add_argument(
        "--automaton", metavar="NAME", help="task option (parity-ood: any catalogue automaton; default parity)"
    )
    s.add_argument("--dyck", metavar="K,D", help="task option for the Dyck experiments (default 2,4)")
    s.add_argument("--to", metavar="DIR", help="publish: where each experiment's slim results go (docs/results)")
    s.add_argument(
        "--docs",
        metavar="PAGE",
        help="publish: the docs page whose verdict table is rewritten from every result in --to",
    )
    return {"experiment": _cmd_experiment}


def _list() -> int:
    import textwrap

    from sandbox_lens.interp.experiments import EXPERIMENTS

    pad = " " * 23
    for e in EXPERIMENTS.values():
        takes = f"; options --{', --'.join(e.takes)}" if e.takes else ""
        print(f"{e.name:22s} {e.section}; ~{e.minutes:g} min on 2 cores{takes}")
        for text in (e.claim, f"scale: {e.scale}"):
            print(textwrap.fill(text, 100, initial_indent=pad, subsequent_indent=pad))
    return 0


def _cmd_experiment(args: argparse.Namespace) -> int:
    from sandbox_lens.interp.experiments import EXPERIMENTS, get_experiment, run_experiment

    if args.name == "list":
        return _list()
    if not args.out:
        raise SandboxError(f"interp experiment {args.name} needs --out DIR")
    if args.name == "publish":
        from sandbox_lens.interp.experiments.results import publish

        if not args.to:
            raise SandboxError("interp experiment publish needs --to DIR (where the slim results go)")
        present = [n for n in EXPERIMENTS if (Path(args.out) / n).is_dir()]
        if not present:
            raise SandboxError(f"{args.out} holds no experiment's directory (one of: {', '.join(EXPERIMENTS)})")
        for path in publish(args.out, args.to, present, args.docs, table=list(EXPERIMENTS)):
            print(f"wrote {path}")
        return 0
    if args.to or args.docs:
        raise OptionError("--to and --docs go with `interp experiment publish`")
    if args.workers is not None and args.workers < 1:
        raise OptionError("--workers must be ≥ 1")
    options = {k: getattr(args, k) for k in ("automaton", "dyck") if getattr(args, k) is not None}
    seeds = None
    if args.seeds:
        from sandbox_lens.interp.cli.training import _parse_seeds

        seeds = _parse_seeds(args.seeds)
    if args.name == "all":
        from sandbox_lens.interp.experiments.report import write_index

        if options:
            raise SandboxError(
                "`interp experiment all` runs every experiment on its default task; give task options "
                "to one experiment at a time"
            )
        if seeds and not args.quick:  # every experiment's seeds checked before the first one runs
            from sandbox_lens.interp.experiments.base import check_seeds

            for name, e in EXPERIMENTS.items():
                check_seeds(name, list(seeds), len(e.load().SEEDS))
        for name, e in EXPERIMENTS.items():
            print(f"{name} ...", file=sys.stderr)
            r = run_experiment(
                e,
                Path(args.out) / name,
                quick=args.quick,
                seeds=seeds,
                backend=args.backend,
                workers=args.workers,
                progress=progress_wanted(),
            )
            _summary(r, Path(args.out) / name)
        print(f"index -> {write_index(args.out, list(EXPERIMENTS))}")
        return 0
    e = get_experiment(args.name)
    r = run_experiment(
        e,
        args.out,
        quick=args.quick,
        seeds=seeds,
        backend=args.backend,
        workers=args.workers,
        progress=progress_wanted(),
        options=options,
    )
    _summary(r, Path(args.out))
    return 0


def _summary(r: dict, out: Path) -> None:
    from sandbox_lens.interp.experiments.rules import effect_text

    print(f"{r['experiment']}: {r['runs']} runs ({r['trained_now']} trained now), {r['minutes']:.1f} min")
    for c in r["claims"]:
        print(f"  [{c['verdict']}] {c['claim']}: {c['measured']}")
        effect = effect_text(c)
        if effect:
            print(f"      {effect}" + (f" — {c['why']}" if c.get("why") else ""))
    print(f"  -> {out / 'report.html'}")
