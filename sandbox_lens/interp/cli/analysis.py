"""`interp compare`, `evaluate`, `report` and `demo`: analyses and the pages they write."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from sandbox_lens.interp.cli.common import add_kind_options, add_settings, refuse_other_kinds_options, settings_given
from sandbox_lens.interp.compare.config import CompareConfig
from sandbox_lens.interp.errors import OptionError, SandboxError
from sandbox_lens.interp.jsonfile import read_json
from sandbox_lens.interp.progress import wanted as progress_wanted

__all__ = ["register"]


def register(sub) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Add this module's commands to the `interp` parser; return their handlers."""
    s = sub.add_parser("compare", help="constructed vs trained circuits on one task: report.html + metrics.json")
    s.add_argument(
        "task",
        metavar="TASK",
        help="dyck, ffl (the flip-flop language), or a catalogue automaton (e.g. parity, grid9, C3, flipflop)",
    )
    add_kind_options(s, "compare_options")
    s.add_argument("--length", "-T", type=int, help="length (defaults: dyck 28, ffl 64 = the FFL string, automata 16)")
    add_settings(s, CompareConfig)
    s.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="where report.html, metrics.json, patterns.npz (and the twin, OUT/twin) go",
    )

    s = sub.add_parser(
        "evaluate", help="a twin or a model under distribution and length shifts, beside the exact construction"
    )
    s.add_argument("run", nargs="?", metavar="RUN_DIR", help="a run directory of `interp train`")
    s.add_argument("--model", metavar="DIR", help="a model saved by `interp build` (instead of RUN_DIR)")
    s.add_argument("--length", "-T", type=int, help="input length (default: the training length)")
    add_kind_options(s, "shift_options")
    s.add_argument("--samples", type=int, default=500, help="inputs per shift")
    s.add_argument("--seed", type=int, default=0, help="seed of the sampled inputs")
    s.add_argument("--no-skyline", action="store_true", help="leave out the exact construction's rows")
    s.add_argument(
        "--attention",
        choices=("soft", "hard"),
        default="soft",
        help="evaluate with the models' softmax attention (soft, the default) or with every attention row replaced by "
        "its argmax (hard; ties share the weight)",
    )
    s.add_argument("--json", action="store_true", help="print one JSON object (rows: one per model and shift)")
    s.add_argument("--out", metavar="FILE.json", help="also write that object to FILE.json")

    s = sub.add_parser("report", help="rebuild report.html of `interp compare` from its files (no model run)")
    s.add_argument("directory", metavar="DIR", help="the --out directory of `interp compare`")

    s = sub.add_parser(
        "demo", help="build, verify and draw the prefix scan for parity and S5 (`make demo` is `interp compare dyck`)"
    )
    s.add_argument("--out", default="reports/prefix-scan", metavar="DIR", help="where report.html goes")
    s.add_argument("--samples", type=int, default=500, help="sampled words per verification")

    return {"compare": _cmd_compare, "evaluate": _cmd_evaluate, "report": _cmd_report, "demo": _cmd_demo}


def _cmd_compare(args: argparse.Namespace) -> int:
    from sandbox_lens.interp.compare.analyse import compare, comparison_for
    from sandbox_lens.interp.tasks.dyck import parse_dyck_spec
    from sandbox_lens.interp.tasks.kinds import AUTOMATON, kind_names, task_kind

    kind = task_kind(args.task) if args.task in kind_names() else AUTOMATON  # else: a catalogue automaton
    refuse_other_kinds_options(args, kind, "compare_options", "{flag} goes with `compare {other}`")
    config = CompareConfig(**settings_given(args, CompareConfig))  # refuses a bad setting before any work
    if args.length is not None and args.length < kind.min_length:
        raise OptionError(
            f"--length must be ≥ {kind.min_length} for {kind.name} tasks, got {args.length} "
            f"(leave it out for the default)"
        )
    comparison = comparison_for(args.task, dyck=parse_dyck_spec(args.dyck), length=args.length, ffl=args.ffl)
    from sandbox_lens.interp.files import claimed

    with claimed(Path(args.out)):  # one writer per comparison directory (its twin, under twin/, has its own lock)
        report = compare(comparison, Path(args.out), config, progress=progress_wanted())
    t = read_json(Path(args.out) / "metrics.json").get("twin_training") or {}
    if t.get("reached_target") is False:
        print(
            f"interp: warning: the twin stopped at {t['final_accuracy']:.3f}, below its target {t['target_accuracy']:g} "
            f"(stopped by {t['stopped_by']}); the report says so. More --train-minutes continues it.",
            file=sys.stderr,
        )
    print(f"report: {report}")
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from sandbox_lens.interp.evaluate import evaluate, skyline
    from sandbox_lens.interp.files import atomic_write

    if bool(args.run) == bool(args.model):
        raise SandboxError("evaluate needs a run directory of `interp train` or --model DIR (one of them)")
    from sandbox_lens.interp.train import open_model

    model = open_model(args.run or args.model)
    name = "twin" if model.card.construction == "trained" else model.card.construction
    card = model.card
    kind = card.task_kind
    trained = card.options.get("trained_length", card.max_length)
    default_length = min(trained, model.cfg.n_ctx - len(card.io.prefix))
    length = default_length if args.length is None else args.length
    refuse_other_kinds_options(args, kind, "shift_options", "{flag} applies to {other} models; this one models {kind}")
    shifts = kind.shifts(card.source, length, vars(args))
    models = {name: model}
    if not args.no_skyline:
        top = max(s.length() for s in shifts)
        exact = skyline(model, top)
        if exact is not None:
            models[f"{exact.card.construction} (exact)"] = exact
    if args.attention == "hard":
        from sandbox_lens.interp.model.run import hard_attention

        models = {f"{n} (hard attention)": hard_attention(m) for n, m in models.items()}
    rows = evaluate(models, shifts, samples=args.samples, seed=args.seed, progress=progress_wanted())
    result = {
        "source": str(args.run or args.model),
        "attention": args.attention,
        "kind": kind.name,
        "task": card.task,
        "samples": args.samples,
        "seed": args.seed,
        "rows": rows,
    }
    if args.out:
        out = Path(args.out)
        if out.is_dir():
            raise OptionError(f"--out {out} is a directory; give a file name")
        if not out.parent.is_dir():
            raise OptionError(f"--out: folder {out.parent} does not exist")
        atomic_write(out, (json.dumps(result, indent=1) + "\n").encode())
    if args.json:
        print(json.dumps(result))
        return 0
    width = max(len(r["shift"]) for r in rows)
    errors = "strings_with_error" in rows[0]  # the flip-flop language counts strings with any wrong read
    print(f"{'model':28s} {'shift':{width}s} {'accuracy':>9s} {'final':>7s}" + ("  string errors" if errors else ""))
    for r in rows:
        extra = f"  {r['strings_with_error']}/{r['inputs']}" if errors else ""
        print(f"{r['model'][:28]:28s} {r['shift']:{width}s} {r['accuracy']:9.4f} {r['final_accuracy']:7.4f}{extra}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from sandbox_lens.interp.compare.report import write_report
    from sandbox_lens.interp.files import claimed, remove_torn_writes

    directory = Path(args.directory)
    if not directory.is_dir():
        raise SandboxError(f"no comparison in {directory} (not a directory; run `interp compare` first)")
    # one writer: a comparison still writing there (or another report) is refused at once; holding the lock,
    # every temporary a killed report left is torn and removed
    with claimed(directory, "the comparison directory"):
        remove_torn_writes(directory / "report.html")
        print(f"report: {write_report(directory)}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from sandbox_lens.interp.demo import run_demo
    from sandbox_lens.interp.files import claimed

    with claimed(Path(args.out)):  # one writer per directory, as every other command that writes one
        path = run_demo(Path(args.out), samples=args.samples)
    print(f"report: {path}")
    return 0
