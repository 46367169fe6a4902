"""`interp align`: where a model holds its task's variables, causally (interchange interventions, DAS),
beside a random-init null and a construction of the same task."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from sandbox_lens.interp.causal.defaults import DAS_STEPS, SITE_DAS_STEPS
from sandbox_lens.interp.errors import OptionError, SandboxError
from sandbox_lens.interp.progress import wanted as progress_wanted

__all__ = ["register"]


def register(sub) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Add this module's commands to the ``interp`` parser; returns {command: handler}."""
    s = sub.add_parser(
        "align",
        help="causal alignment: where a model computes its task's variables (interchange "
        "interventions, DAS), beside a random-init null and a construction",
        description="For each variable of the task's high-level model (automata: state, and where "
        "the automaton has them a cascade's levels, a 1-D gridworld's displacement and "
        "boundary, by name the prefix scan's window<l>; dyck: top, depth; ffl: bit): scans full interchange interventions over the residual stream, "
        "runs position-shared DAS at every hook and over k with a matched random-subspace "
        "control, the untrained readout basis and five random-init nulls searched the same "
        "way, measures the construction's own named sites; fitted, chosen and reported on "
        "three disjoint splits of the pairs; writes align.json and align.png.",
    )
    s.add_argument("--run", metavar="DIR", help="a run directory of `interp train` (a trained twin)")
    s.add_argument("--model", metavar="DIR", help="a model saved by `interp build`")
    s.add_argument(
        "--construction", metavar="NAME", help="also scan this construction of the model's task, at its length"
    )
    s.add_argument(
        "--high-level",
        default="parallel",
        choices=["parallel", "recurrent"],
        help="how a variable reaches the outputs: at its own position only (parallel) or carried forward "
        "position by position (recurrent: automata, ffl)",
    )
    s.add_argument("--variable", metavar="NAME[,NAME]", help="only these variables (default: all the task's)")
    s.add_argument(
        "--candidates",
        metavar="all|NAME[,NAME]",
        help="which registered algorithm the model runs: test each candidate (sequential, scan, counter, "
        "cascade, parity_first, boundary; dyck: stack, depth_only) by interchanges at every residual "
        "site and the sites the model's card names, beside five random-init nulls, and rank them "
        "(writes align.json's 'candidates' and candidates.png); 'all': every one the task can have. "
        "Alone it skips the per-variable section (add --variable for both)",
    )
    s.add_argument(
        "--das",
        action="store_true",
        help="with --candidates: also search each candidate's variables along a DAS subspace at every residual "
        "site (fitted on the fit split, in the model and in every null; chosen only where it beats the untrained "
        "readout), for variables that share a site with others; --das-steps steps each",
    )
    s.add_argument(
        "--checkpoints",
        action="store_true",
        help="with --run: identify the algorithm (--candidates, default all) at every model the run kept "
        "(interp train --keep-checkpoints N) and its last step, beside its loss curve (writes "
        "align.json's 'over_training' and over_training.png)",
    )
    s.add_argument(
        "--pairs",
        type=int,
        default=128,
        help="pairs per split: DAS is fitted on one, the hook and k chosen on another, the third reported "
        "(3 × N drawn; default 128, at least 16)",
    )
    s.add_argument(
        "--das-steps",
        type=int,
        default=None,
        help=f"optimiser steps of each DAS fit (default {DAS_STEPS}; with --candidates --das, {SITE_DAS_STEPS} per site)",
    )
    s.add_argument("--k", default="1,2,4,8", help="DAS dimensions, comma-separated (default 1,2,4,8)")
    s.add_argument("--seed", type=int, default=0, help="seed of the pairs, the null and DAS")
    s.add_argument("--json", action="store_true", help="print a summary as one JSON object")
    s.add_argument("--out", required=True, metavar="DIR", help="output directory (align.json, align.png)")
    return {"align": _cmd_align}


def _cmd_align(args: argparse.Namespace) -> int:
    from sandbox_lens.interp.files import claimed

    ks = _checked(args)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise OptionError(f"--out {out} is a file")
    with claimed(out):  # one writer: a second align, or a training run in that directory, is refused at once
        return _align(args, ks, out)


def _align(args: argparse.Namespace, ks: list[int], out: Path) -> int:
    from sandbox_lens.interp.causal.align import align, high_level_of, nulls_of
    from sandbox_lens.interp.files import atomic_write, write_json
    from sandbox_lens.interp.viz import interchange_scans_png

    if args.checkpoints:
        return _over_training(args, out)
    from sandbox_lens.interp.train import open_model

    model = open_model(args.run or args.model)
    high = high_level_of(model, args.high_level)  # refuses other tasks and the LSTM before any work
    variables = [high.variable(v.strip()) for v in args.variable.split(",") if v.strip()] if args.variable else None
    if args.candidates is not None:
        from sandbox_lens.interp.causal.identify import candidates_of

        candidates_of(model, args.candidates)  # an unknown or impossible candidate is refused before any work
        if args.construction:
            raise OptionError(
                "--candidates ranks algorithms for the model itself; --construction compares one "
                "variable's sites (run them separately)"
            )
    constructions = {args.construction: _construction(args.construction, model)} if args.construction else {}
    trained = model.card.construction == "trained"
    result: dict = {}
    if args.candidates is None or variables:
        result = align(
            model,
            constructions=constructions,
            null=nulls_of(model, args.seed) if trained else None,
            mode=args.high_level,
            pairs=args.pairs,
            ks=ks,
            **_steps(args),
            seed=args.seed,
            variables=variables,
            progress=progress_wanted(),
        )
    if args.candidates is not None:
        from sandbox_lens.interp.causal.identify import identify
        from sandbox_lens.interp.viz import candidates_png

        found = identify(
            model,
            args.candidates,
            nulls=nulls_of(model, args.seed),
            pairs=args.pairs,
            seed=args.seed,
            progress=progress_wanted(),
            das=args.das,
            **_steps(args),
        )
        result = {**result, "candidates": found, "seconds": result.get("seconds", 0.0) + found["seconds"]}
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "align.json", result)
    if "variables" in result:
        atomic_write(out / "align.png", interchange_scans_png(result))
    if "candidates" in result:
        atomic_write(out / "candidates.png", candidates_png(result["candidates"]))
    if args.json:
        print(json.dumps(summary(result)))
        return 0
    if "candidates" in result:
        _print_candidates(result["candidates"], model)
    for name, v in result.get("variables", {}).items():
        m = v["model"]
        print(
            f"{name} in {model.card.construction} ({args.high_level} model); first full-swap site reaching IIA 0.95 "
            f"per position: {_sites(m['first_sites'])}"
        )
        for site in m["named_sites"]:
            print(f"  named site {site['site']}: IIA {_f(site['iia'])} on {site['outputs']} changed held-out outputs")
        print(
            "  linear probe, readable / used (IIA of swapping its directions), by hook: "
            + ", ".join(f"{_short(r['hook'])} {r['probe_accuracy']:.2f} / {_f(r['iia'])}" for r in m["probes"])
        )
        d = m["das"]
        if d["chosen"] is None:
            print("  DAS: no hook before the last attention layer to search (a read-out variable)")
        else:
            print(
                f"  DAS (one subspace for every position), k = {d['k_max']}, select-split IIA by hook: "
                + ", ".join(f"{_short(r['hook'])} {_f(r['iia'])}" for r in d["by_hook"])
            )
            ch = d["chosen"]
            print(
                f"  DAS chosen on the select split: {_short(ch['hook'])}, k = {ch['k']}; test IIA {_f(ch['test']['iia'])} "
                f"{_ci(ch['test']['interval'])} (random {ch['k']}-dim subspace {_f(ch['random_subspace']['iia'])}; "
                f"untrained readout basis there "
                f"{_f(next(r['iia'] for r in d['readout'] if r['hook'] == ch['hook']))})"
            )
            bd = d["boundless"]
            print(
                f"  boundless DAS at {_short(bd['hook'])}: learns k = {bd['k']}, IIA {_f(bd['iia'])} {_ci(bd['interval'])}"
            )
        if "null" in v:
            nd = v["null"]["das"]
            print(
                f"  nulls ({result['nulls']} random-init models searched the same way): DAS test IIA up to "
                f"{_f(nd['iia'])} (upper bound {_f(nd['upper'])}); best full swap "
                f"{_f(max((b for b in v['null']['best'].values() if b is not None), default=None))}"
            )
        for cname, c in v["constructions"].items():
            print(f"  {cname}: first sites {_sites(c['first_sites'])}")
            print(
                f"  verdict against {cname} (full swaps): {c['verdict']['verdict']} "
                f"(stability {c['verdict']['stability']:.0%})"
            )
            print(
                f"  verdict against {cname} (DAS): {c['das_verdict']['verdict']} "
                f"(stability {c['das_verdict'].get('stability', 1.0):.0%})"
            )
        if "das_verdict" in v:
            print(
                f"  verdict (DAS): {v['das_verdict']['verdict']} (stability {v['das_verdict'].get('stability', 1.0):.0%})"
            )
    written = ["align.json"] + ["align.png"] * ("variables" in result) + ["candidates.png"] * ("candidates" in result)
    print(f"wrote {', '.join(str(out / p) for p in written)} ({result['seconds']:.0f} s)")
    return 0


def _steps(args: argparse.Namespace) -> dict[str, int]:
    """``das_steps`` where ``--das-steps`` was given (else each analysis keeps its own default)."""
    return {} if args.das_steps is None else {"das_steps": args.das_steps}


def _checked(args: argparse.Namespace) -> list[int]:
    """The options of `interp align` checked before any work (one line each); the DAS dimensions."""
    from sandbox_lens.interp.causal.evidence import MIN_SPLIT

    if bool(args.run) == bool(args.model):
        raise SandboxError("give one of --run DIR (a twin) or --model DIR (a saved construction)")
    if args.pairs < MIN_SPLIT:
        raise OptionError(
            f"--pairs {args.pairs} is too few for three disjoint splits (fit, select, test): "
            f"use --pairs {MIN_SPLIT} or more"
        )
    if args.das_steps is not None and args.das_steps < 1:
        raise OptionError(f"--das-steps must be ≥ 1, got {args.das_steps}")
    if args.das and args.candidates is None and not args.checkpoints:
        raise OptionError(
            "--das adds DAS sites to the search of --candidates (the per-variable section always runs DAS): "
            "add --candidates all or names"
        )
    try:
        ks = sorted({int(k) for k in args.k.split(",") if k})
    except ValueError:
        raise OptionError(f"--k takes comma-separated integers, got {args.k!r}") from None
    if not ks or min(ks) < 1:
        raise OptionError(f"--k needs positive dimensions, got {args.k!r}")
    return ks


def _over_training(args: argparse.Namespace, out: Path) -> int:
    """`interp align --run DIR --checkpoints`: the identification at every kept model of the run."""
    from sandbox_lens.interp.causal.over_training import over_training
    from sandbox_lens.interp.files import atomic_write, write_json
    from sandbox_lens.interp.viz import over_training_png

    if not args.run:
        raise OptionError("--checkpoints aligns the models a training run kept: give --run DIR")
    if args.construction or args.variable:
        raise OptionError(
            "--checkpoints identifies the algorithm at each kept model; --construction and --variable "
            "belong to one model's alignment (run them on a kept model's directory)"
        )
    result = over_training(
        args.run,
        args.candidates or "all",
        pairs=args.pairs,
        seed=args.seed,
        progress=progress_wanted(),
        das=args.das,
        **_steps(args),
    )
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "align.json", {"over_training": result})
    atomic_write(out / "over_training.png", over_training_png(result))
    print(
        f"which algorithm over training ({args.run}; {result['nulls']} random-init nulls, {args.pairs} pairs per split):"
    )
    for r in result["steps"]:
        scores = ", ".join(
            f"{n} {_f(c['score'])}{'*' if c['status'] == 'passes' else ''}" for n, c in r["candidates"].items()
        )
        print(
            f"  step {r['step']:>6}  accuracy {_f(r['accuracy'])}  {r['identified']:<13} "
            f"(stability {r['stability']:.0%}); scores {scores}"
        )
    print("  (* passes)")
    print(f"wrote {out / 'align.json'}, {out / 'over_training.png'}")
    return 0


def _print_candidates(found: dict, model) -> None:
    """The ranking of the candidate algorithms, one line each, then its verdict."""
    title = "twin" if model.card.construction == "trained" else model.card.construction
    print(
        f"which algorithm does this {title} run? (test IIA on {found['pairs']['test']} held-out pairs, sites chosen "
        f"on {found['pairs']['select']} others; {found['nulls']} random-init nulls; chance {found['chance']:.2f}, "
        f"model accuracy {found['ceiling']:.3f})"
    )
    for i, r in enumerate(found["candidates"]):
        score, first = r["score"], i == 0  # the top candidate's passing graph tests are shown too
        null = "" if r["null_score"] is None else f", nulls ≤ {r['null_score']:.3f}"
        print(
            f"  {r['algorithm']:<13} {r['status']:<10} score {_f(score['iia'])} {_ci(score['interval'])}{null}: "
            + ", ".join(
                f"{v['variable']} {_f(v['iia'])} ({v['status']}{', DAS' if v.get('das') else ''})"
                for v in r["variables"]
            )
        )
        for v in r["variables"]:
            for e in v["edges"]:
                if e["status"] == "fails":
                    print(f"      edge {e['edge']}: IIA {_f(e['iia'])} on {e['outputs']} outputs (fails)")
                path = e.get("path")
                if path is not None and (path["status"] == "fails" or (first and path["status"] == "passes")):
                    print(
                        f"      edge {e['edge']} by path interchange: IIA {_f(path['iia'])} {_ci(path['interval'])} "
                        f"on {path['outputs']} outputs ({path['status']})"
                    )
            joint = v.get("joint")
            if joint is not None and (joint["status"] == "fails" or (first and joint["status"] == "passes")):
                print(
                    f"      {v['variable']} from all its parents at once (joint interchange): IIA {_f(joint['iia'])} "
                    f"{_ci(joint['interval'])} on {joint['outputs']} outputs ({joint['status']})"
                )
    top = found["candidates"][0] if found["candidates"] else None
    if top and top.get("partitions"):
        print(
            f"  which inputs {top['algorithm']} explains (test IIA by cell): "
            + "; ".join(
                f"{name}: " + ", ".join(f"{cell} {_f(c['iia'])}" for cell, c in cells.items())
                for name, cells in top["partitions"].items()
            )
        )
    for variable, rows in found.get("das", {}).get("sites", {}).items():
        best = max(rows, key=lambda x: x["select_iia"] or -1.0, default=None)
        if best is not None:
            print(
                f"  DAS for {variable}: best at {_short(best['hook'])} (k = {best['k']}), select IIA "
                f"{_f(best['select_iia'])} (readout there {_f(best['readout_select_iia'])}, nulls ≤ "
                f"{_f(best['null_select_iia'])}){'' if best['admitted'] else ', not admitted: the readout does as well'}"
            )
    for name, why in found["not_applicable"].items():
        print(f"  {name:<13} not applicable: {why}")
    print(f"  verdict: {found['verdict']}")


def summary(result: dict) -> dict:
    """One JSON line per alignment: per variable, first sites, named sites, DAS by k and the verdicts; the
    identified algorithm with --candidates."""
    out: dict = {"seconds": result["seconds"], "variables": {}}
    if "candidates" in result:
        c = result["candidates"]
        out["candidates"] = {
            "identified": c["identified"],
            "stability": c["stability"],
            "ranking": [
                {"algorithm": r["algorithm"], "status": r["status"], "score": r["score"]["iia"]}
                for r in c["candidates"]
            ],
        }
    for name, v in result.get("variables", {}).items():
        m = v["model"]
        out["variables"][name] = {
            "first_sites": m["first_sites"],
            "ceiling": m["ceiling"],
            "named_sites": {s["site"]: s["iia"] for s in m["named_sites"]},
            "das_hook": m["das"]["hook"],
            "das": [
                {"k": d["k"], "iia": d["iia"], "test_iia": d["test"]["iia"], "random": d["random_subspace"]["iia"]}
                for d in m["das"]["k"]
            ],
            "null_das": v.get("null", {}).get("das", {}).get("iia"),
            "verdicts": {
                c: {"full_swaps": r["verdict"]["verdict"], "das": r["das_verdict"]["verdict"]}
                for c, r in v["constructions"].items()
            },
            **({"das_verdict": v["das_verdict"]["verdict"]} if "das_verdict" in v else {}),
        }
    return out


def _short(hook: str) -> str:
    return hook.replace("blocks.", "").replace(".hook_resid_", " ")


def _sites(first: dict) -> str:
    return ", ".join(f"{p}: {_short(h) if h else '—'}" for p, h in first.items())


def _ci(interval) -> str:
    return "" if interval is None or interval[0] is None else f"[{interval[0]:.2f}, {interval[1]:.2f}]"


def _construction(name: str, model):
    from sandbox_lens.constructions.registry import REGISTRY, build
    from sandbox_lens.interp.errors import ConstructionError
    from sandbox_lens.interp.model.hooked import to_hooked

    entry = REGISTRY.get(name)
    if entry is None:
        build(name, None, 1)  # refuses an unknown name in one line
    if entry.takes != model.card.task_kind.name:
        raise ConstructionError(
            f"{name} models the {entry.takes} task, not this model's {model.card.task_kind.name} task"
        )
    from sandbox_lens.interp.tasks.kinds import task_from_dict

    card = model.card
    if card.construction == "trained":  # built for the twin's training inputs (one symbol less for next-token tasks)
        source, length = card.task_kind.construction_input(task_from_dict(card.task))
    else:
        source, length = card.source, card.max_length
    return to_hooked(build(name, source, length))


def _f(x) -> str:
    return "—" if x is None else f"{x:.3f}"
