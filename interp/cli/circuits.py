"""`interp circuit`: a circuit method on a construction (scored against its ground truth) or a twin."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

from interp.errors import SandboxError

__all__ = ["register"]


def register(sub) -> dict[str, Callable[[argparse.Namespace], int]]:
    from interp.cli.common import automaton_args

    s = sub.add_parser("circuit", help="find a circuit (patching, path, attribution, ACDC) and score it against a "
                                       "construction's ground truth: circuit.json + circuit.png")
    s.add_argument("construction", nargs="?", help="construction name (see `interp list`), or none with --model/--run")
    automaton_args(s, saved_model=True, cascade=True)
    s.add_argument("--run", metavar="DIR", help="a run directory of `interp train` (a trained twin)")
    s.add_argument("--length", "-T", type=int, metavar="T", help="the construction's length (and the pairs')")
    s.add_argument("--option", "-O", action="append", default=[], metavar="KEY=VALUE", help="construction option")
    s.add_argument("--variant", choices=["stack", "uniform", "balanced"], help="dyck: the second layer's attention")
    s.add_argument("--method", default="acdc", choices=["patching", "path", "attribution", "acdc"],
                   help="activation patching of nodes, path patching of edges, attribution patching, or ACDC (default)")
    s.add_argument("--corrupt", metavar="KIND", help="the counterfactual: symbol|resample (automata), "
                                                     "bracket-type|resample (dyck), bit|instruction|resample (ffl); default the first")
    s.add_argument("--pairs", type=int, default=64, help="counterfactual pairs")
    s.add_argument("--pair-length", type=int, metavar="T", help="length of the pairs' words (default: the model's)")
    s.add_argument("--threshold", type=float, default=0.01, help="effect below which an edge or node is left out")
    s.add_argument("--metric", choices=["logit_diff", "kl"], help="default: kl for acdc, logit_diff otherwise")
    s.add_argument("--ablation", "--source", dest="source", default="resample", choices=["resample", "zero", "mean"],
                   help="what a patched edge or node delivers: the corrupted word's value (default), zeros, or the "
                        "clean batch's mean per position; the method is scored against this ablation's ground-truth level")
    s.add_argument("--acdc-mode", default="normalised", choices=["normalised", "reference"],
                   help="acdc: this project's normalised variant (|Δ| of the task's normalised metric on the changed "
                        "outputs) or the reference implementation's (signed Δ of the full KL at every scored position)")
    s.add_argument("--no-curve", action="store_true", help="skip the faithfulness curve over circuit sizes (CPR, CMD)")
    s.add_argument("--per-position", action="store_true", help="patching: also patch each node at each position")
    s.add_argument("--score", action="store_true", help="require scores against a ground truth (constructions only)")
    s.add_argument("--seed", type=int, default=0, help="seed of the counterfactual pairs")
    s.add_argument("--json", action="store_true", help="print circuit.json's summary as one JSON object")
    s.add_argument("--out", required=True, metavar="DIR", help="output directory (circuit.json, circuit.png)")
    return {"circuit": _cmd_circuit}


def _model(args: argparse.Namespace):
    """(model, ground truth or None, title)."""
    from interp.circuits.truth import ground_truth, ground_truth_of_model

    sources = [a for a in ("model", "run") if getattr(args, a)]
    if len(sources) > 1:
        raise SandboxError("give one of CONSTRUCTION, --model DIR, --run DIR")
    if args.run and (args.construction or args.length is not None or args.option):
        raise SandboxError("--run loads a trained twin: it takes no construction, --length or --option")
    if args.model and args.option:
        raise SandboxError("--option applies when building; a saved model already has its options")
    if args.run or args.model:
        from interp.train import open_model

        model = open_model(args.run or args.model, expect_construction="trained" if args.run else args.construction)
        where = args.run or args.model
        if model.card.construction == "trained":
            return model, None, f"twin ({model.card.kind}) from {where}"
        truth = ground_truth_of_model(model) if model.card.theorem else None  # no theorem: no ground truth
        return model, truth, f"{model.card.construction} from {where}"
    if not args.construction or args.length is None:
        raise SandboxError("circuit needs CONSTRUCTION and --length (or --model DIR, or --run DIR)")
    from interp.cli.constructions import _build_spec
    from interp.model.hooked import to_hooked

    _, spec = _build_spec(args)
    return to_hooked(spec), ground_truth(spec), f"{spec.name} ({spec.theorem}), T = {args.length}"


def _cmd_circuit(args: argparse.Namespace) -> int:
    from interp.circuits.analyse import analyse, check_settings
    from interp.circuits.draw import circuit_png
    from interp.files import atomic_write, write_json
    from interp.model.run import require_hooked

    if args.pairs < 1:
        raise SandboxError(f"--pairs must be ≥ 1, got {args.pairs}")
    if not args.threshold > 0:
        raise SandboxError(f"--threshold must be positive, got {args.threshold}")
    check_settings(args.method, args.metric, args.source, args.threshold, args.acdc_mode)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise SandboxError(f"--out {out} is a file")
    model, truth, title = _model(args)
    require_hooked(model, "circuit analysis")
    if args.score and truth is None:
        raise SandboxError("--score needs a ground truth, and a trained twin has none: score the method on the "
                           "construction (interp circuit CONSTRUCTION ...) and set the twin's circuit beside it")
    result = analyse(model, args.method, truth, pairs=args.pairs, corruption=args.corrupt, length=args.pair_length,
                     threshold=args.threshold, metric=args.metric, source=args.source, acdc_mode=args.acdc_mode,
                     per_position=args.per_position, curve=not args.no_curve, seed=args.seed, progress=sys.stderr.isatty())
    result["model"] = {"title": title, "construction": model.card.construction, "task": model.card.task,
                       "shape": {k: getattr(model.cfg, k) for k in ("n_layers", "n_heads", "d_model", "d_head", "d_mlp")}}
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "circuit.json", result)
    atomic_write(out / "circuit.png", circuit_png(result, f"{title}: {args.method}"))
    summary = {k: result.get(k) for k in ("method", "level", "source", "ground_truth_level", "auroc", "average_precision",
                                          "edge_precision", "edge_recall", "wall_seconds")}
    if "curve" in result:
        summary["cpr"], summary["cmd"] = result["curve"]["cpr"], result["curve"]["cmd"]
    summary["faithfulness"] = result["faithfulness"]
    summary["faithfulness_metrics"] = result["faithfulness_metrics"]
    summary["circuit_edges"] = len(result["circuit"]["edges"])
    summary["graph_edges"] = len(result["graph"]["edges"])
    if args.json:
        print(json.dumps(summary))
        return 0
    f = result["faithfulness_metrics"]
    print(f"{args.method} on {title}: {summary['circuit_edges']} of {summary['graph_edges']} edges kept "
          f"({result['wall_seconds']:.1f} s); faithfulness: accuracy {f['accuracy']:.3f}, "
          f"logit difference {f['logit_diff']:.3f}, KL {f['kl']:.3f} (full model 1)")
    if "curve" in result:
        c = result["curve"]
        print(f"  faithfulness over circuit sizes (0.1%–100% of edges): CPR {c['cpr']:.3f} (higher is better), "
              f"CMD {c['cmd']:.3f} (lower is better)")
    if truth is not None:
        print(f"  against the '{result['ground_truth_level']}' ground truth ({len(result['ground_truth_edges'])} edges, "
              f"what {args.source} ablation under the {result['pairs']['corruption']} corruption can see): "
              f"AUROC {_fmt(result.get('auroc'))}, AP {_fmt(result.get('average_precision'))}, "
              f"precision {_fmt(result['edge_precision'])}, recall {_fmt(result['edge_recall'])}")
        for name, miss in list(result["missed"].items())[:5]:
            print(f"    missed {name}: {miss['reason']} (alone {miss['effect_alone']:+.3f})")
        for name, why in list(result["spurious"].items())[:5]:
            print(f"    spurious {name}: {why}")
    if "agreement" in result:
        g = result["agreement"]
        print(f"  agreement with real patching: edges ρ = {_fmt(g['edges_spearman_vs_path_patching'])}, nodes ρ = "
              f"{_fmt(g['nodes_spearman_vs_activation_patching'])}; {g['speedup_vs_path_patching']:.0f}× faster than path patching")
    print(f"  wrote {out / 'circuit.json'} and {out / 'circuit.png'}")
    return 0


def _fmt(x) -> str:
    return "—" if x is None else f"{x:.3f}"
