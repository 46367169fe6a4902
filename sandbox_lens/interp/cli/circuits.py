"""`interp circuit`: a circuit method on a construction (scored against its ground truth) or a twin."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandbox_lens.interp.errors import OptionError, SandboxError
from sandbox_lens.interp.progress import wanted as progress_wanted

__all__ = ["register"]


def register(sub) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Add this module's commands to the ``interp`` parser; returns {command: handler}."""
    from sandbox_lens.interp.circuits.methods import names
    from sandbox_lens.interp.cli.common import automaton_args

    s = sub.add_parser(
        "circuit",
        help="find a circuit (patching, path, attribution, EAP-IG, ACDC, baselines) and score "
        "it against a construction's ground truth, or score a circuit file "
        "(interp circuit score CONSTRUCTION --circuit-file F)",
        description="interp circuit [CONSTRUCTION] runs a method; interp circuit score [CONSTRUCTION] "
        "--circuit-file F scores a circuit found elsewhere at every ground-truth level. "
        "Writes circuit.json, circuit.png, the circuit in three formats and the ground "
        "truth's levels (ground-truth/).",
    )
    s.add_argument(
        "positional",
        nargs="*",
        metavar="[score] CONSTRUCTION",
        help="construction name (see `interp list`), or none with --model/--run; 'score' first scores "
        "--circuit-file instead of running a method",
    )
    automaton_args(s, saved_model=True, cascade=True)
    s.add_argument("--run", metavar="DIR", help="a run directory of `interp train` (a trained twin)")
    s.add_argument("--length", "-T", type=int, metavar="T", help="the construction's length (and the pairs')")
    s.add_argument(
        "--option",
        "-O",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="construction option (e.g. -O negatives=distractor,cancel,constant for informative negatives)",
    )
    s.add_argument(
        "--variant", help="dyck: the second layer's attention (the dyck construction's variant option; interp list)"
    )
    s.add_argument(
        "--method",
        default="acdc",
        choices=list(names()),
        metavar="METHOD",
        help=f"one of {', '.join(names(optional=False))} (default acdc; docs/circuits/README.md says what each "
        f"scores), or auto-circuit's implementation of one ({', '.join(sorted(set(names()) - set(names(optional=False))))}; "
        "needs the auto-circuit extra)",
    )
    s.add_argument(
        "--circuit-file",
        metavar="F",
        help="score: a circuit in the sandbox-lens, EAP-IG/MIB or auto-circuit JSON format",
    )
    s.add_argument(
        "--sign",
        choices=["loss", "metric"],
        help="score: how an EAP-IG file's scores are signed when "
        "it does not say — loss (EAP-IG's loss=True, MIB's default: positive = important) or metric "
        "(loss=False: negative = important)",
    )
    s.add_argument(
        "--corrupt",
        metavar="KIND",
        help="the counterfactual: symbol|resample (automata), "
        "bracket-type|resample (dyck), bit|instruction|resample (ffl); default the first",
    )
    s.add_argument("--pairs", type=int, help="counterfactual pairs (default 64, or the circuit file's)")
    s.add_argument("--pair-length", type=int, metavar="T", help="length of the pairs' words (default: the model's)")
    s.add_argument("--threshold", type=float, default=0.01, help="effect below which an edge or node is left out")
    s.add_argument("--metric", choices=["logit_diff", "kl"], help="default: kl for acdc, logit_diff otherwise")
    s.add_argument(
        "--ablation",
        "--source",
        dest="source",
        choices=["resample", "zero", "mean"],
        help="what a patched edge or node delivers: the corrupted word's value (default), zeros, or the "
        "clean batch's mean per position; the method is scored against this ablation's ground-truth level",
    )
    s.add_argument(
        "--normaliser",
        choices=["ablated", "word"],
        default="ablated",
        help="what effects are normalised against: the run with every edge ablated (MIB's m(∅), the default) or "
        "the corrupted word's run under every ablation (where zeroing a part throws the ablated run far away: "
        "circuit.json's normaliser_ratio says how far)",
    )
    s.add_argument(
        "--acdc-mode",
        default="normalised",
        choices=["normalised", "reference"],
        help="acdc: this project's normalised variant (the absolute change of the task's normalised metric on the changed "
        "outputs) or the reference implementation's (signed Δ of the full KL at every scored position)",
    )
    s.add_argument("--steps", type=int, help="eap-ig: integration steps m (default 16; m = 1 is attribution patching)")
    s.add_argument(
        "--level",
        choices=["structural", "live", "relevant", "read", "resample", "zero", "mean"],
        help="the ground-truth level to score against (default: the ablation's: resample, zero or mean)",
    )
    s.add_argument(
        "--engine",
        default="auto",
        choices=["auto", "bare", "hooks"],
        help="patching engine: a bare forward over the weights (any TransformerLens version; the default "
        "where it runs) or TransformerLens hooks (3.9 only)",
    )
    s.add_argument("--no-curve", action="store_true", help="skip the faithfulness curve over circuit sizes (CPR, CMD)")
    s.add_argument(
        "--per-position",
        action="store_true",
        help="patching: also patch each node at each position (scored per position against a construction's truth)",
    )
    s.add_argument(
        "--agreement",
        action="store_true",
        help="attribution, eap-ig, atp-star, gim: also rerun path and node patching "
        "and report how far the estimates agree with them (Spearman's ρ; costs a path-patching run)",
    )
    s.add_argument(
        "--why-missed",
        default="16",
        metavar="N|all",
        help="patch alone at most N of the ground-truth edges the circuit left out, to say why each was missed, "
        "those nearest the output first (the cheapest; default 16; all: every one, as the leaderboard does — one "
        "path-patching pass per edge, from its receiver's block on)",
    )
    s.add_argument("--score", action="store_true", help="require scores against a ground truth (constructions only)")
    s.add_argument("--seed", type=int, help="seed of the counterfactual pairs (default 0, or the circuit file's)")
    s.add_argument("--json", action="store_true", help="print circuit.json's summary as one JSON object")
    s.add_argument("--out", required=True, metavar="DIR", help="output directory (circuit.json, circuit.png, ...)")
    return {"circuit": _cmd_circuit}


def _positionals(args: argparse.Namespace) -> bool:
    """Read ``[score] [CONSTRUCTION]`` into ``args.construction``; True in score mode."""
    words = list(args.positional)
    scoring = bool(words) and words[0] == "score"
    if scoring:
        words = words[1:]
    if len(words) > 1:
        raise SandboxError(f"interp circuit takes [score] and one construction, got {' '.join(args.positional)}")
    args.construction = words[0] if words else None
    if scoring and not args.circuit_file:
        raise SandboxError("interp circuit score needs --circuit-file F")
    if args.circuit_file and not scoring:
        raise OptionError("--circuit-file goes with interp circuit score")
    return scoring


def _model(args: argparse.Namespace):
    """(model, ground truth or None, title)."""
    from sandbox_lens.interp.circuits.truth import ground_truth, ground_truth_of_model

    sources = [a for a in ("model", "run") if getattr(args, a)]
    if len(sources) > 1:
        raise SandboxError("give one of CONSTRUCTION, --model DIR, --run DIR")
    if args.run and (args.construction or args.length is not None or args.option):
        raise OptionError("--run loads a trained twin: it takes no construction, --length or --option")
    if args.model and args.option:
        raise OptionError("--option applies when building; a saved model already has its options")
    if args.run or args.model:
        from sandbox_lens.interp.train import open_model

        model = open_model(args.run or args.model, expect_construction="trained" if args.run else args.construction)
        where = args.run or args.model
        if model.card.construction == "trained":
            if model.card.options.get("alignment"):  # trained with --align: its imposed circuit, in levels
                from sandbox_lens.interp.circuits.imposed import imposed_truth

                return model, imposed_truth(model), f"aligned twin ({model.card.kind}) from {where}"
            return model, None, f"twin ({model.card.kind}) from {where}"
        truth = ground_truth_of_model(model) if model.card.theorem else None  # no theorem: no ground truth
        return model, truth, f"{model.card.construction} from {where}"
    if not args.construction or args.length is None:
        raise SandboxError("circuit needs CONSTRUCTION and --length (or --model DIR, or --run DIR)")
    from sandbox_lens.interp.cli.constructions import _build_spec
    from sandbox_lens.interp.model.bare import BareModel

    _, spec = _build_spec(argparse.Namespace(**{**vars(args), "seed": args.seed or 0}))  # dyck's balanced scores
    # the construction's weights without TransformerLens: the bare engines run on them, and the TransformerLens
    # model is built (and TransformerLens imported) only if something asks for hooks (--engine hooks, auto-circuit)
    return (
        BareModel(spec, sparse=False, bare_calls=True),
        ground_truth(spec),
        f"{spec.name} ({spec.theorem}), T = {args.length}",
    )


def _why_missed(text: str) -> int | None:
    """``--why-missed``: a count, or ``all`` (None)."""
    if text == "all":
        return None
    if not text.isdigit() or len(text) > 9:
        raise OptionError(f"--why-missed takes a number of edges or all; got {text!r}")
    return int(text)


def _cmd_circuit(args: argparse.Namespace) -> int:
    from sandbox_lens.interp.circuits.analyse import check_settings
    from sandbox_lens.interp.circuits.config import CircuitConfig
    from sandbox_lens.interp.files import claimed

    scoring = _positionals(args)
    if args.sign is not None and not scoring:
        raise OptionError("--sign goes with interp circuit score (how the circuit file's scores are signed)")
    if scoring and (args.per_position or args.steps is not None or args.agreement):
        raise SandboxError(
            "interp circuit score scores a file: --per-position, --steps and --agreement go with a method"
        )
    config = CircuitConfig(
        pairs=args.pairs or 64,
        corruption=args.corrupt,
        length=args.pair_length,
        threshold=args.threshold,
        metric=args.metric,
        source=args.source or "resample",
        acdc_mode=args.acdc_mode,
        steps=args.steps,
        per_position=args.per_position,
        curve=not args.no_curve,
        seed=0 if args.seed is None else args.seed,
        level=args.level,
        engine=args.engine,
        agreement=args.agreement,
        normaliser=args.normaliser,
        why_missed=_why_missed(args.why_missed),
        progress=progress_wanted(),
    )
    for flag in ("pairs", "pair_length", "seed"):
        value = getattr(args, flag)
        if value is not None and value < (0 if flag == "seed" else 1):
            raise OptionError(f"--{flag.replace('_', '-')} must be ≥ {0 if flag == 'seed' else 1}, got {value}")
    if not scoring:
        check_settings(args.method, config)  # the method's refusals and its optional package, before any model
    else:
        config.check()
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise OptionError(f"--out {out} is a file")
    with claimed(out):  # one writer: a second circuit, or a training run in that directory, is refused at once
        return _circuit(args, config, scoring, out)


def _circuit(args: argparse.Namespace, config: Any, scoring: bool, out: Path) -> int:
    from sandbox_lens.interp.circuits.analyse import analyse
    from sandbox_lens.interp.model.run import require_hooked

    model, truth, title = _model(args)
    require_hooked(model, "circuit analysis")
    if (args.score or scoring or args.level) and truth is None:
        raise SandboxError(
            "scores need a ground truth, and a trained twin has none: score the method on the "
            "construction (interp circuit CONSTRUCTION ...) and set the twin's circuit beside it"
        )
    if scoring:
        return _score_file(args, model, truth, title, out)
    settings = {
        "pairs": config.pairs,
        "corruption": config.corruption,
        "length": config.length,
        "source": config.source,
        "seed": config.seed,
    }
    result = analyse(model, args.method, truth, config)
    alignment = model.card.options.get("alignment") if model.card.construction == "trained" else None
    if alignment:  # a twin trained with --align: its imposed circuit is a ground truth of nodes
        from sandbox_lens.interp.circuits.imposed import score_imposed

        result["imposed"] = score_imposed(result, alignment)
    pictured = _write(out, model, truth, title, result, settings, f"{title}: {args.method}")
    summary = _summary(result)
    if alignment:
        summary["imposed"] = result["imposed"]
    if args.json:
        print(json.dumps(summary))
        return 0
    f = result["faithfulness_metrics"]
    if result["faithfulness"] is None:  # auto-circuit's rankers: no circuit of their own
        print(
            f"{args.method} on {title}: a ranking of {summary['graph_edges']} edges, no circuit of its own "
            f"({result['wall_seconds']:.1f} s)"
        )
    else:
        print(
            f"{args.method} on {title}: {summary['circuit_edges']} of {summary['graph_edges']} edges kept "
            f"({result['wall_seconds']:.1f} s); faithfulness: accuracy {f['accuracy']:.3f}, "
            f"logit difference {f['logit_diff']:.3f}, KL {f['kl']:.3f} (full model 1)"
        )
    if "auto_circuit" in result:
        a = result["auto_circuit"]
        print(
            f"  auto-circuit {a['version']} {a['algorithm']!r} on the {a['pairs_kept']} of {a['pairs_drawn']} pairs "
            f"whose last output changes (it reads the last position only)"
        )
    _print_scores(result, args.source or "resample", truth is not None)
    if alignment:
        m = result["imposed"]
        print(
            f"  against the circuit imposed by --align {m['construction']} ({', '.join(m['imposed_nodes'])}; "
            f"{m['positives']} of {m['edges']} edges between them): AUROC {_fmt(m['auroc'])}, average precision "
            f"{_fmt(m['average_precision'])}; circuit edges P {_fmt(m['edge_precision'])} R {_fmt(m['edge_recall'])}, "
            f"nodes P {_fmt(m['node_precision'])} R {_fmt(m['node_recall'])}"
        )
    if "agreement" in result:
        g = result["agreement"]
        print(
            f"  agreement with real patching: edges ρ = {_fmt(g['edges_spearman_vs_path_patching'])}, nodes ρ = "
            f"{_fmt(g['nodes_spearman_vs_activation_patching'])}; {g['speedup_vs_path_patching']:.0f}× faster than path patching"
        )
    print(
        f"  wrote {out}/: circuit.json, circuit.png, circuit.edges.json, circuit.eap-ig.json, circuit.auto-circuit.json"
        + (", circuit.positions.png" if pictured else "")
        + (", ground-truth/" if truth is not None else "")
    )
    return 0


def _score_file(args: argparse.Namespace, model, truth, title: str, out: Path) -> int:
    """``interp circuit score``: a circuit file against every level, under the file's own settings unless given."""
    from sandbox_lens.interp.circuits.analyse import score_circuit
    from sandbox_lens.interp.circuits.exchange import read_circuit
    from sandbox_lens.interp.files import write_json

    scores, chosen, saved, signed = read_circuit(args.circuit_file, truth.graph, args.sign)
    settings = {
        "pairs": args.pairs or saved.get("pairs") or 64,
        "corruption": args.corrupt or saved.get("corruption"),
        "length": args.pair_length or saved.get("pair_length"),
        "source": args.source or saved.get("ablation") or "resample",
        "seed": args.seed if args.seed is not None else int(saved.get("seed") or 0),
    }
    result = score_circuit(
        model,
        truth,
        scores,
        chosen,
        signed=signed,
        threshold=args.threshold,
        curve=not args.no_curve,
        level=args.level,
        engine=args.engine,
        **settings,
    )
    result["circuit_file"] = {"path": str(args.circuit_file), "settings": saved}
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "score.json", result)
    summary = _summary(result)
    if args.json:
        print(json.dumps(summary))
        return 0
    print(
        f"{args.circuit_file} on {title}: {summary['circuit_edges']} of {summary['graph_edges']} edges in the circuit; "
        f"faithfulness (accuracy) {result['faithfulness']:.3f}"
    )
    _print_scores(result, settings["source"], True)
    for level, sc in result["scores_by_level"].items():
        print(
            f"    {level:10s} AUROC {_fmt(sc['auroc'])}  AP {_fmt(sc['average_precision'])}  "
            f"precision {_fmt(sc['precision'])}  recall {_fmt(sc['recall'])}  ({sc['positives']} edges)"
        )
    print(f"  wrote {out / 'score.json'}")
    return 0


def _write(out: Path, model, truth, title: str, result: dict, settings: dict, caption: str) -> bool:
    """circuit.json, the picture, the circuit in three formats and (constructions) the ground truth's levels; with
    per-position scores, their picture too (returns whether it was drawn)."""
    import numpy as np

    from sandbox_lens.interp.circuits.draw import circuit_png, positions_png
    from sandbox_lens.interp.circuits.exchange import ground_truth_files, to_auto_circuit, to_eap_ig, to_sandbox_lens
    from sandbox_lens.interp.circuits.graph import Graph
    from sandbox_lens.interp.circuits.levels import LEVEL_NAMES
    from sandbox_lens.interp.files import atomic_write, write_json

    result["model"] = {
        "title": title,
        "construction": model.card.construction,
        "task": model.card.task,
        "shape": {k: getattr(model.cfg, k) for k in ("n_layers", "n_heads", "d_model", "d_head", "d_mlp")},
    }
    graph = truth.graph if truth is not None else Graph.of_model(model)
    scores = np.array([np.nan if v is None else v for v in result["ranking"]], dtype=np.float64)
    signed = np.array([np.nan if v is None else v for v in result["signed"]], dtype=np.float64)
    chosen = [e.name in set(result["circuit"]["edges"]) for e in graph.edges]
    file_settings = {
        "method": result["method"],
        "ablation": settings["source"],
        "pairs": settings["pairs"],
        "corruption": result["pairs"]["corruption"],
        "seed": settings["seed"],
        "pair_length": settings["length"],
        "threshold": result["threshold"],
    }
    files = {
        "circuit.edges.json": to_sandbox_lens(
            graph, scores, chosen, construction=model.card.construction, settings=file_settings, signed=signed
        ),
        "circuit.eap-ig.json": to_eap_ig(graph, signed, chosen, model.cfg),
        "circuit.auto-circuit.json": to_auto_circuit(graph, scores, chosen),
    }
    if truth is not None and "levels" in result:
        members = {lv: {e for e in graph.edges if lv in result["levels"]["edges"][e.name]["in"]} for lv in LEVEL_NAMES}
        files.update(
            {
                f"ground-truth/{k}": v
                for k, v in ground_truth_files(graph, members, truth.construction, model.cfg).items()
            }
        )
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "circuit.json", result)
    for name, content in files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        write_json(out / name, content)
    atomic_write(out / "circuit.png", circuit_png(result, caption))
    picture = positions_png(result, caption)
    if picture is not None:
        atomic_write(out / "circuit.positions.png", picture)
    return picture is not None


def _summary(result: dict) -> dict:
    summary = {
        k: result.get(k)
        for k in (
            "method",
            "level",
            "source",
            "ground_truth_level",
            "auroc",
            "average_precision",
            "edge_precision",
            "edge_recall",
            "wall_seconds",
        )
    }
    if "curve" in result:
        summary["cpr"], summary["cmd"] = result["curve"]["cpr"], result["curve"]["cmd"]
    summary["faithfulness"] = result["faithfulness"]
    summary["faithfulness_metrics"] = result["faithfulness_metrics"]
    summary["circuit_edges"] = len(result["circuit"]["edges"])
    summary["graph_edges"] = len(result["graph"]["edges"])
    return summary


def _print_scores(result: dict, source: str, scored: bool) -> None:
    kinks = result.get("kinks")
    if kinks and kinks["at_kink"]:
        print(
            f"  note: {kinks['at_kink']} of {kinks['units']} ReLU pre-activations sit at the kink (within rounding of "
            "0): there the gradient, and so this method's scores, are decided by rounding"
        )
    if "curve" in result:
        c = result["curve"]
        print(
            f"  faithfulness over circuit sizes (0.1%–100% of edges): CPR {c['cpr']:.3f} (higher is better), "
            f"CMD {c['cmd']:.3f} (lower is better)"
        )
    if not scored:
        return
    print(
        f"  against the '{result['ground_truth_level']}' ground truth ({len(result['ground_truth_edges'])} edges, "
        f"what {source} ablation under the {result['pairs']['corruption']} corruption can see): "
        f"AUROC {_fmt(result.get('auroc'))}, AP {_fmt(result.get('average_precision'))}, "
        f"precision {_fmt(result['edge_precision'])}, recall {_fmt(result['edge_recall'])}"
    )
    pos = result.get("position_scores")
    if pos and not pos["scored"]:
        print(f"  per position: {pos['reason']}")
    elif pos:
        for kind, sc in ((k, pos[k]) for k in ("edges", "nodes") if k in pos):
            print(
                f"  per position, ({kind[:-1]}, position) items against the per-position truth ({sc['positives']} of "
                f"{sc['edges']}): AUROC {_fmt(sc['auroc'])}, AP {_fmt(sc['average_precision'])}"
            )
        if "crossing" in pos:
            sc = pos["crossing"]
            print(
                f"  per (edge, query, key), a key or value split by its queries ({sc['positives']} of {sc['edges']}): "
                f"AUROC {_fmt(sc['auroc'])}, AP {_fmt(sc['average_precision'])}"
            )
    for name, miss in list(result["missed"].items())[:5]:
        alone = "" if miss["effect_alone"] is None else f" (alone {miss['effect_alone']:+.3f})"
        print(f"    missed {name}: {miss['reason']}{alone}")
    for name, why in list(result["spurious"].items())[:5]:
        print(f"    spurious {name}: {why}")


def _fmt(x) -> str:
    return "—" if x is None else f"{x:.3f}"
