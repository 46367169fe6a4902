"""`interp train` (one run, or a sweep of seeds × a grid) and `interp population`."""

from __future__ import annotations

import argparse
import json
import warnings
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

from sandbox_lens.interp.cli.common import add_kind_options, add_settings, refuse_other_kinds_options, settings_given
from sandbox_lens.interp.errors import OptionError, SandboxError
from sandbox_lens.interp.progress import wanted as progress_wanted
from sandbox_lens.interp.train.config import ModelShape, TrainConfig

__all__ = ["register"]


def register(sub) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Add this module's commands to the `interp` parser; return their handlers."""
    s = sub.add_parser("train", help="train a HookedTransformer on a task (checkpoints, resume, replicates)")
    from sandbox_lens.interp.tasks.kinds import all_kinds, kind_names, kinds_help

    s.add_argument(
        "task",
        choices=kind_names(aliases=True),
        help="; ".join(
            f"{k.name}: {k.summary}" + (f" (old name: {', '.join(k.aliases)})" if k.aliases else "")
            for k in all_kinds()
        ),
    )
    add_kind_options(s, "train_options")
    s.add_argument("--length", "-T", type=int, help=f"sequence length (defaults: {kinds_help('default_length')})")
    add_settings(s, ModelShape, unset=[f.name for f in fields(ModelShape) if f.name != "arch"], helps=_shape_defaults())
    by_kind = lambda key: kinds_help("train_defaults", lambda d: f"{d[key]:g}")  # noqa: E731
    add_settings(
        s,
        TrainConfig,
        unset=("steps", "lr", "target_accuracy"),
        helps={
            "steps": f" (default: {by_kind('steps')})",
            "lr": f" (default: {by_kind('lr')})",
            "target_accuracy": f" (default: {by_kind('target_accuracy')})",
        },
    )
    s.add_argument(
        "--init-from",
        metavar="NAME[:VARIANT]",
        help="start from a construction's exact weights (e.g. dyck, dyck:uniform, ffl, modular_counter); "
        "the twin takes the construction's shape",
    )
    s.add_argument(
        "--init-layers",
        nargs="+",
        metavar="PREFIX",
        default=["embed", "pos_embed", "blocks.0"],
        help="with --init-from: the parameters copied (default: embed pos_embed blocks.0)",
    )
    s.add_argument(
        "--align",
        metavar="NAME[:VARIANT]",
        help="train the twin to carry a construction's variables where its proof puts them: interchange "
        "intervention training plus strictness (off-circuit heads and MLPs resampled must not matter); "
        "the correspondence goes into the run's config and card (e.g. modular_counter, dyck, ffl)",
    )
    s.add_argument(
        "--seeds", default="0", metavar="RANGE", help="seeds, e.g. 0, 0-9 or 1,3,5 (several: a process pool)"
    )
    s.add_argument(
        "--stack",
        default="auto",
        metavar="auto|off|N",
        help="several seeds on the local pool: train a cell's seeds as stacked ensembles, one forward, backward and "
        "AdamW step for up to 8 members (the same runs up to float rounding, each in its own directory); auto: where "
        "a member's step is small enough for it to be faster; off: every run apart; N: at most N members a stack",
    )
    s.add_argument(
        "--workers",
        type=int,
        help="several runs: processes of the local pool, or CPUs of a local Ray runtime (default: CPU cores)",
    )
    s.add_argument(
        "--grid",
        nargs="+",
        default=[],
        metavar="KEY=V1,V2",
        help="a sweep over settings, e.g. lr=1e-3,3e-3 layers=1,2 (one run directory per cell and seed)",
    )
    s.add_argument(
        "--backend",
        choices=["local", "ray"],
        default="local",
        help="several runs: a local process pool, or Ray tasks (a local runtime, or the cluster in RAY_ADDRESS)",
    )
    s.add_argument(
        "--resume",
        action="store_true",
        help="one run: continue it from its checkpoint (sweeps always skip finished runs and resume the rest)",
    )
    s.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="the run directory (checkpoints, model, metrics); several runs: one subdirectory each",
    )

    s = sub.add_parser("population", help="how the seeds of a sweep agree: attention variation, references, probes")
    s.add_argument("directory", metavar="DIR", help="the --out directory of `interp train --seeds ... [--grid ...]`")
    s.add_argument("--samples", type=int, default=64, help="words for the probes and reference scores (default 64)")
    s.add_argument("--seed", type=int, default=0, help="seed of the probe words")
    s.add_argument(
        "--causal-pairs",
        type=int,
        default=0,
        metavar="N",
        help="also align every twin causally (interp align) on N pairs per split (fit, select, test), beside "
        "five random-init nulls and the exact construction; per-variable summaries over seeds (0: skip)",
    )
    s.add_argument("--das-steps", type=int, default=150, help="optimiser steps of each DAS fit (default 150)")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.add_argument("--out", metavar="FILE.json", help="also write that object to FILE.json")

    s = sub.add_parser(
        "adopt",
        help="bring your own model: a TransformerLens state dict and its config, trained "
        "elsewhere, saved with a card so every command takes it (--model DIR)",
        description="Reads a state dict (torch.save(model.state_dict()) as .pt, or .safetensors) and its "
        "HookedTransformerConfig as JSON, checks them against the task (vocabulary, logits, "
        "context), and saves the model like a twin (model.json + model.safetensors): then "
        "`interp verify|align|evaluate|circuit --model DIR` work on it. The model must read "
        "PREFIX + one token per input symbol and give the task's outputs as its first logits.",
    )
    s.add_argument("task", choices=kind_names(aliases=False), help="the task it was trained on")
    add_kind_options(s, "train_options")
    s.add_argument("--length", "-T", type=int, help=f"its training length (defaults: {kinds_help('default_length')})")
    s.add_argument("--state-dict", required=True, metavar="FILE", help="the weights (.pt, .pth or .safetensors)")
    s.add_argument("--config", required=True, metavar="FILE.json", help="its HookedTransformerConfig as JSON")
    s.add_argument(
        "--prefix", default=None, metavar="T[,T]", help="the token ids before the input (default 0: a BOS token)"
    )
    s.add_argument(
        "--symbol-tokens",
        default=None,
        metavar="T,T,...",
        help="the token id of each input symbol, in the task's order (default: symbol s is token s + 1)",
    )
    s.add_argument("--out", required=True, metavar="DIR", help="where to save the adopted model")

    return {"train": _cmd_train, "population": _cmd_population, "adopt": _cmd_adopt}


def _token_list(text: str | None, flag: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(t) for t in text.split(",") if t.strip() != ""]
    except ValueError:
        raise SandboxError(f"{flag} takes comma-separated token ids, got {text!r}") from None


def _cmd_adopt(args: argparse.Namespace) -> int:
    from sandbox_lens.interp.model.saved import save_model
    from sandbox_lens.interp.train.adopt import load_adopted

    prefix, symbols = _token_list(args.prefix, "--prefix"), _token_list(args.symbol_tokens, "--symbol-tokens")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise OptionError(f"--out {out} is a file")
    task = _training_task(args)
    model = load_adopted(
        args.state_dict, args.config, task, prefix=prefix, symbol_tokens=symbols, name=Path(args.state_dict).name
    )
    save_model(model, out)
    print(f"adopted {Path(args.state_dict).name} for {task.name} -> {out} (interp verify --model {out})")
    return 0


def _shape_defaults() -> dict[str, str]:
    """ " (default: ...)" for each shape option: the field's, or per task kind where a kind's twin differs."""
    from sandbox_lens.interp.tasks.kinds import all_kinds, kinds_help

    out = {}
    for f in fields(ModelShape):
        if any(f.name in k.twin_shape for k in all_kinds()):
            out[f.name] = (
                f" (default: {kinds_help('twin_shape', lambda d, f=f: str(d.get(f.name, f.default) or 'auto'))})"
            )
        elif f.default is not None and f.name != "arch":
            out[f.name] = f" (default: {f.default})"
    return out


def _parse_seeds(text: str) -> list[int]:
    seeds: list[int] = []
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()) or max(len(lo), len(hi)) > 10 or int(hi or lo) > 2**32 - 1:
            raise OptionError(f"--seeds expects numbers and ranges like 0-9 or 1,3,5; got {text!r}")
        count = int(hi) - int(lo) + 1 if sep else 1
        if len(seeds) + count > 1000:  # counted before the list is built
            raise OptionError(f"--seeds must name between 1 and 1000 seeds; got {text!r}")
        seeds += list(range(int(lo), int(hi) + 1)) if sep else [int(lo)]
    if not seeds:  # a range like 3-1 (more than 1000 are refused above, before the list is built)
        raise OptionError(f"--seeds must name between 1 and 1000 seeds; got {text!r}")
    return seeds


def _training_task(args: argparse.Namespace):
    """The training task of `interp train KIND`: the kind reads its own options; another kind's are refused."""
    from sandbox_lens.interp.tasks.kinds import canonical_name, task_kind

    if canonical_name(args.task) != args.task:
        warnings.warn(
            f"`interp train {args.task}` is now `interp train {canonical_name(args.task)}`", FutureWarning, stacklevel=2
        )
        args.task = canonical_name(args.task)
    kind = task_kind(args.task)
    refuse_other_kinds_options(args, kind, "train_options", "{flag} goes with `train {other}`, not `train {kind}`")
    return kind.task_from_options(vars(args), args.length)


def _cmd_train(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from sandbox_lens.interp.train import default_shape, task_defaults

    task = _training_task(args)
    defaults = task_defaults(task)  # the same as `interp compare`'s twin
    shape_given = settings_given(args, ModelShape)
    if args.arch == "lstm" and set(shape_given) & {
        "n_heads",
        "d_head",
        "d_mlp",
        "normalization",
        "positional",
        "n_ctx",
    }:
        raise OptionError(
            "--heads, --d-head, --d-mlp, --norm, --pos and --n-ctx describe a transformer; "
            "an LSTM takes --layers, --d-model (embedding) and --hidden"
        )
    shape = replace(default_shape(task, args.arch), **shape_given)
    given = settings_given(args, TrainConfig)
    if given.get("target_accuracy") == "none":
        given["target_accuracy"] = None  # train every step
    config = TrainConfig(**{**defaults, **given})
    init_spec = None
    if config.attention == "uniform" and args.arch != "transformer":
        raise OptionError("--attention uniform sets a transformer's query and key weights; an LSTM has none")
    if args.init_from:
        shape, config, init_spec = _init_from(args, task, shape, config)
    if args.align:
        from sandbox_lens.interp.causal.impose import correspondence

        if args.arch != "transformer":
            raise OptionError("--align intervenes on a transformer's residual stream; an LSTM has none")
        if args.grid:
            from sandbox_lens.interp.train.sweep import parse_grid

            shaped = sorted(set(parse_grid(args.grid)) & {f.name for f in fields(ModelShape)})
            if shaped:
                raise OptionError(
                    f"--align fixes the circuit for one shape; a --grid over {', '.join(shaped)} "
                    "would change it from cell to cell (sweep those with one --align run per shape)"
                )
        config = replace(
            config, alignment=correspondence(args.align, task, shape, edges=config.iit_variables == "graph")
        )
    elif (
        config.iit_weight,
        config.strict_weight,
        config.align_target,
        config.iit_variables,
        config.strict_on,
        config.strict_target,
        config.strict_nodes,
    ) != (1.0, 1.0, 0.95, "turns", "answers", None, "all"):
        raise OptionError(
            "--iit-weight, --iit-variables, --strict-weight, --strict-on, --strict-target, --strict-nodes and "
            "--align-target belong to --align"
        )
    seeds = _parse_seeds(args.seeds)
    out = Path(args.out)
    single = len(seeds) == 1 and not args.grid and args.backend == "local"
    if config.freeze and not args.init_from:
        raise OptionError("--freeze keeps weights copied by --init-from fixed; without --init-from there are none")
    if args.resume and single:
        from sandbox_lens.interp.files import exclusive
        from sandbox_lens.interp.train import has_checkpoint

        if not has_checkpoint(out):
            if out.is_dir():
                with exclusive(out):  # a run just started there, not yet checkpointed: refused as in use, first
                    pass
            raise OptionError(f"--resume: {out} holds no checkpoint to continue; leave out --resume to start afresh")
    if args.workers is not None and single:
        raise OptionError("--workers runs a sweep's seeds side by side; one run takes one process (give --seeds)")
    from sandbox_lens.interp.train.sweep import check_stack

    check_stack(args.stack)
    if args.stack != "auto" and (single or args.backend != "local"):
        raise OptionError("--stack stacks several seeds on the local pool (give --seeds, without --backend ray)")
    if single:
        from sandbox_lens.interp.train import train

        m = train(
            task,
            shape,
            replace(config, seed=seeds[0]),
            out,
            resume=args.resume,
            progress=progress_wanted(),
            init_spec=init_spec,
        )
        print(
            f"{task.name}: final accuracy {m['final_accuracy']:.4f}, best {m['best_accuracy']:.4f} after "
            f"{m['steps']} steps, {m['wall_seconds'] / 60:.1f} min (stopped by {m['stopped_by']}) -> {out / 'metrics.json'}"
        )
        last = m["history"][-1]
        if "imposed_iia" in last:
            print(
                "  imposed sites' held-out IIA: "
                + ", ".join(f"{k} {'—' if v is None else f'{v:.3f}'}" for k, v in last["imposed_iia"].items())
                + f" (target {config.align_target:g}; IIT loss {last['iit_loss']:.4f}, strictness loss "
                f"{last['strict_loss']:.4f}"
                + (f", held out {last['strict_held_out']:.4f}" if last.get("strict_held_out") is not None else "")
                + ")"
            )
        return 0
    from sandbox_lens.interp.train.sweep import parse_grid, run_sweep

    s = run_sweep(
        task,
        shape,
        config,
        out,
        seeds,
        grid=parse_grid(args.grid),
        backend=args.backend,
        workers=args.workers,
        progress=progress_wanted(),
        init_spec=init_spec,
        stack=args.stack,
    )
    runs = len(s["runs"])
    print(
        f"{task.name}: {len(s['cells'])} cell(s) × {len(seeds)} seed(s), {s['trained_now']} of {runs} runs trained now; "
        f"best accuracy {s['best_accuracy']:.4f}, median {s['median_best_accuracy']:.4f} -> {out / 'summary.json'}"
    )
    if s["stacked_now"]:
        sizes = sorted({len(k) for k in s["stacked_now"]})
        print(
            f"  trained as {len(s['stacked_now'])} stacked ensemble(s) of {'/'.join(map(str, sizes))} seeds "
            "(--stack off: every run apart)"
        )
    for c in s["cells"] if len(s["cells"]) > 1 else []:
        print(
            f"  {c['cell']:40s} best {c['best_accuracy']:.4f}  median {c['median_best_accuracy']:.4f}  "
            f"at target {c['runs_at_target']}/{len(seeds)}"
        )
    return 0


def _init_from(args: argparse.Namespace, task, shape, config):
    """The construction a twin starts from, the twin's shape (the construction's), and the config."""
    from sandbox_lens.interp.init_from import start_from

    if args.arch != "transformer":
        raise OptionError("--init-from starts a transformer from a construction's weights")
    if settings_given(args, ModelShape).keys() - {"arch"}:
        raise OptionError(
            "--init-from takes the construction's shape; leave out --layers, --d-model, --heads, "
            "--d-head, --d-mlp, --norm, --pos and --n-ctx"
        )
    extra = max(args.pos_shift, (getattr(task, "contrastive_room", None) or 0) if args.contrastive else 0)
    twin, config, spec = start_from(args.init_from, task, config, args.init_layers, extra)
    return twin, config, spec


def _cmd_population(args: argparse.Namespace) -> int:
    from sandbox_lens.interp.compare.population import population

    if args.samples < 8:
        raise OptionError("--samples must be ≥ 8 (the probes split them into train and test)")
    if args.causal_pairs and args.causal_pairs < 8 or args.causal_pairs < 0:
        raise OptionError(f"--causal-pairs must be 0 or ≥ 8, got {args.causal_pairs}")
    if args.das_steps < 1:
        raise OptionError(f"--das-steps must be ≥ 1, got {args.das_steps}")
    result = population(
        Path(args.directory),
        samples=args.samples,
        seed=args.seed,
        out=args.out,
        causal_pairs=args.causal_pairs,
        das_steps=args.das_steps,
        progress=progress_wanted(),
    )
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
            print(
                f"  {head:6s} variation between seeds {v['mean']:.2f} ({v['ratio_to_random']:.2f} × random); "
                f"closest reference: {common} in {refs.get(common, {}).get('heads', 0)} of {len(cell['seeds'])} seeds"
            )
        for latent, p in cell["probes"].items():
            print(f"  probe {latent}: median {p['median']:.3f} (min {p['min']:.3f}, max {p['max']:.3f})")
        for variable, v in cell.get("causal", {}).get("variables", {}).items():
            s = v["summary"]
            print(
                f"  causal, {variable}: {s['verdict']['verdict']} ({s['verdict']['share']} seeds, interval "
                f"{_interval(s['implements']['interval'])}); DAS IIA {_estimate(s['das_iia'])}, nulls "
                f"{_estimate(s['null_das_iia'])}; first full-swap block {_estimate(s['median_first_block'])} "
                f"(construction {s['construction_median_first_block']})"
            )
    return 0


def _interval(interval) -> str:
    return "—" if not interval else f"[{interval[0]:.2f}, {interval[1]:.2f}]"


def _estimate(e: dict) -> str:
    return "—" if e["value"] is None else f"{e['value']:.3f} {_interval(e['interval'])}"
