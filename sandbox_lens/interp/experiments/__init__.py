"""Reproductions of the thesis's learning claims, one command each (``interp experiment NAME``).

Each experiment trains populations of twins (and the LSTM baseline where the thesis has one) at a
CPU scale, sets them beside the exact construction of the same task, and writes
``OUT/results.json`` (every number, with the settings and seeds), ``OUT/report.html`` (the
thesis's number beside ours, with a verdict computed by a stated rule, what we conclude, the
caveats) and the run directories (``OUT/runs``; a rerun reuses finished runs). ``quick=True``
runs a seconds-scale version for tests.

Floor 3 (beside :mod:`sandbox_lens.interp.compare` and :mod:`sandbox_lens.interp.evaluate`): the experiments import the
training engine, the evaluation under shift, the probes and the constructions; the report reads
files only.
"""

from __future__ import annotations

from sandbox_lens.interp.experiments.base import Experiment, ExperimentError, run_experiment

__all__ = ["EXPERIMENTS", "get_experiment", "run_experiment", "Experiment", "ExperimentError"]

EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in (
        Experiment(
            name="ffl-glitches",
            title="Attention glitches on the flip-flop language",
            section="§3.5, results R1, R2, R4, R7, R8",
            claim="Transformers trained on FFL(0.8) make rare read errors out of distribution (sparse FFL(0.98), dense "
            "FFL(0.1)); a 1-layer LSTM makes none; training on the mixture {0.9, 0.98, 0.1} helps most; attention "
            "sharpening makes heads sparse but does not remove the errors.",
            scale="T = 64; 2 layers, 2 heads, width 64; 2000 steps × batch 32; 12 seeds per population; 10,000 sparse, "
            "1000 dense and 2000 in-distribution strings",
            minutes=40.0,
            module="sandbox_lens.interp.experiments.ffl_glitches",
        ),
        Experiment(
            name="parity-ood",
            title="Parity out of distribution: shortcuts that fail off the training law",
            section="§3.4.5, Fig. 3.20 (and Lemma 15)",
            claim="A transformer trained on parity at Pr[σ=1] = 0.5 degrades as the test probability, or the number of "
            "ones, moves away from training; the LSTM and the exact construction do not.",
            scale="T = 20; 2 layers, 2 heads, width 64; up to 2000 steps × batch 32; 25 seeds; LSTM 25 seeds; 400 words "
            "per shift; linear probes for the running count at every residual hook",
            minutes=7.0,
            takes=("automaton",),
            defaults={"automaton": "parity"},
            module="sandbox_lens.interp.experiments.parity_ood",
        ),
        Experiment(
            name="dyck-seeds",
            title="Dyck: accurate models whose attention is not stack-like and differs by seed",
            section="§3.6.3.1, Fig. 3.3, footnote 59",
            claim="2-layer, 1-head, width-50 transformers reach ≥ 97% on Dyck_{2,4}; their second-layer attention is "
            "rarely stack-like and varies across seeds almost as much as random patterns (2.20 with linear positions, "
            "2.27 without, against 2.85).",
            scale="Dyck_{2,4}, prefixes of ≤ 28 tokens; 2 layers, 1 head, width 50; up to 1500 steps × batch 32; 40 seeds "
            "× {linear, none, learned} positions",
            minutes=12.0,
            takes=("dyck",),
            defaults={"dyck": "2,4"},
            module="sandbox_lens.interp.experiments.dyck_seeds",
        ),
        Experiment(
            name="dyck-balance",
            title="Balance violation and length generalisation with a minimal first layer",
            section="§3.6.3, Fig. 3.40 (Theorems 1–2)",
            claim="With the construction's first layer frozen and the second trained, the balance violation β of the "
            "trained layer is negatively correlated with accuracy on prefixes of 400–500 tokens; the contrastive "
            "regulariser lowers β and raises that accuracy; β shrinks as the training length N grows (Theorem 2), "
            "also under small weight decay (Corollary 2).",
            scale="Dyck_{2,4}, trained on prefixes of ≤ 28 tokens, models of 508 positions; 1000 steps × batch 32; "
            "lr {1e-3, 3e-3} × contrastive λ {0, 1} × 25 seeds; N ∈ {9D, 18D} × weight decay {0, 1, 10} × 10 seeds; "
            "200 prefixes of 400–500 tokens",
            minutes=21.0,
            takes=("dyck",),
            defaults={"dyck": "2,4"},
            module="sandbox_lens.interp.experiments.dyck_balance",
        ),
        Experiment(
            name="dilution",
            title="Attention dilution: bounded query-key weights cannot attend sharply at long lengths",
            section="§3.5.7.2, Proposition 4 (and Proposition 3, Lemma 16)",
            claim="With ‖W_Kᵀ W_Q‖ bounded, attention is diluted once T ≳ exp(2σ_max): shrinking the query-key "
            "weights of the flip-flop constructions gives a sharp transition to about half the reads wrong, at a σ "
            "that grows with T.",
            scale="the memory (flipflop) and ffl constructions at T = 64, 512, 4096; W_Q × 2^−k, k = 0…14; 16 strings "
            "per length (the bound checked on every query of 4); no training",
            minutes=7.5,
            module="sandbox_lens.interp.experiments.dilution",
        ),
        Experiment(
            name="uniform-dyck",
            title="Uniform attention fits Dyck",
            section="§3.6.2.1, Corollary 1 and footnote 52",
            claim="Transformers whose attention weights are fixed at 0 (uniform attention), with no position embedding, "
            "fit the Dyck distribution almost perfectly (> 99% accuracy).",
            scale="Dyck_{2,4}, prefixes of ≤ 28 tokens; 2 layers, 1 head, width 50, MLP 50, no positions; 1500 steps × "
            "batch 32; 10 seeds with uniform attention and 10 with trained attention",
            minutes=7.0,
            takes=("dyck",),
            defaults={"dyck": "2,4"},
            module="sandbox_lens.interp.experiments.uniform_dyck",
        ),
        Experiment(
            name="random-automata",
            title="Random automata: exact decorrelation, final-state against every-prefix supervision",
            section="arXiv 2510.04115 (as the issue reads it), beside Theorems 10 and 11",
            claim="The final states of independent random permutation automata decorrelate as T grows; twins trained "
            "on final states only learn them worse than twins trained on every prefix; the prefix scan is exact on "
            "every instance, Krohn–Rhodes on the solvable ones.",
            scale="(a) exact pair chains, n = 3–6 points, k ∈ {2, n} symbols, 50 pairs each, T ≤ 64; (b) 5 random "
            "automata on 3 and on 5 points, 2 symbols (none whose state the length alone fixes), T ∈ {8, 16}, one twin "
            "per automaton, length and supervision (default shape, up to 4000 steps × batch 32); (c) both constructions on each, verified at T = 16",
            minutes=14.0,
            module="sandbox_lens.interp.experiments.random_automata",
        ),
        Experiment(
            name="grid-boundary",
            title="Nearest-boundary detectors in trained gridworld models",
            section="§3.4.5, Figs. 3.6 and 3.17 (Theorem 12)",
            claim="Transformers trained on the 1-D gridworld contain heads that attend to the most recent boundary (wall) "
            "position — the detector Theorem 12's construction builds.",
            scale="grid9, T = 64; 2 layers × 2 heads and 4 layers × 4 heads, width 64; up to 3000 steps × batch 32; "
            "3 seeds each; 200 words",
            minutes=16.0,
            takes=("automaton",),
            defaults={"automaton": "grid9"},
            module="sandbox_lens.interp.experiments.grid_boundary",
        ),
        Experiment(
            name="length-generalisation",
            title="Length generalisation: training length and position code",
            section="§3.4.5.2.4, Fig. 3.21",
            claim="Transformer accuracy drops at lengths unseen in training; random position shifts help but are not "
            "perfect; removing the position encoding helps too; the LSTM keeps its accuracy; the constructions are "
            "exact at every length.",
            scale="parity and the Dyck stack (depth 4, 2 types: dyck2-depth4), simulated; N ∈ {8, 16, 32, 64}; positions "
            "none / sinusoidal / learned + random shift, and the LSTM; 2 seeds; up to 1000 steps; tested at 1, 3, 8, "
            "16 × N (200 words each)",
            minutes=24.0,
            takes=("automaton", "dyck"),
            defaults={"automaton": "parity", "dyck": "2,4"},
            module="sandbox_lens.interp.experiments.length_generalisation",
        ),
        Experiment(
            name="pe-at-2t",
            title="Sinusoidal against linear positions at twice the training length",
            section="§3.4.5.2.4, Fig. 3.22",
            claim="With comparable in-distribution accuracy, twins with sinusoidal positions lose more accuracy at "
            "twice the training length than twins with linear positions (Grid₉).",
            scale="grid9, trained at T = 32 with a context of 2T; default automaton shape; up to 2000 steps × batch "
            "32; 10 seeds per position code; 400 words at T and at 2T",
            minutes=14.0,
            takes=("automaton",),
            defaults={"automaton": "grid9"},
            module="sandbox_lens.interp.experiments.pe_at_2t",
        ),
        Experiment(
            name="parity-counts",
            title="Parity by count: the count–position explanation and the position-shift remedy",
            section="§3.4.5.2.3, Fig. 3.20 (right) and the text beside it",
            claim="A parity twin's low-count failures come from a correlation between count and position in its "
            "training words; training with randomly shifted positions significantly improves accuracy at low counts.",
            scale="parity, T = 20; default automaton twin with a context of T + 100, positions plain or shifted by "
            "0..100 per batch; up to 3000 steps × batch 32; 10 seeds per population; 300 words for each count 1..19",
            minutes=22.0,
            takes=("automaton",),
            defaults={"automaton": "parity"},
            module="sandbox_lens.interp.experiments.parity_counts",
        ),
        Experiment(
            name="instability",
            title="Training instability: seeds that disagree, curves that go backwards, EMA and dropout",
            section="§3.4.5.1.1 (beside Figs. 3.15 and 3.16)",
            claim="The median seed lies far below the best; runs that converge go backwards on the way; a moving "
            "average of the weights helps; dropout 0.1 helps the dihedral group and hurts the gridworld.",
            scale="T = 16; one-layer parity twins plain and with EMA γ = 0.9; two-layer D8 and grid9 twins plain and "
            "with dropout 0.1; default width 64; up to 2000 steps × batch 32; 10 seeds per population",
            minutes=29.0,
            module="sandbox_lens.interp.experiments.instability",
        ),
        Experiment(
            name="ffl-one-head",
            title="One head on the flip-flop automaton: latest write, every write, and sharpening's bad minima",
            section="§3.5.6.5 (R8, Fig. 3.34)",
            claim="A sharpened one-layer one-head twin reads the latest write; a plain one spreads over every write of "
            "the correct type; sharpening's bad minima are much likelier at p(⊥) = 0.5 than at 0.9.",
            scale="the flip-flop automaton at T = 64, p(⊥) ∈ {0.5, 0.9}; one block, one head, width 32, plain and "
            "with the entropy penalty λ = 0.01; up to 1500 steps × batch 32; 10 seeds per population; 200 words per "
            "law",
            minutes=19.0,
            module="sandbox_lens.interp.experiments.ffl_one_head",
        ),
        Experiment(
            name="ffl-mixture",
            title="The mixture fix: flip-flop twins trained on {FFL(0.9), FFL(0.98), FFL(0.1)}",
            section="§3.5.4.1, result R4",
            claim="Training on the uniform mixture {0.9, 0.98, 0.1} gives significantly fewer read errors on each of "
            "the three laws than training on FFL(0.8), by a wide margin; 6 of 25 runs make no detected error.",
            scale="T = 64; 2 layers, 2 heads, width 64; 2000 steps × batch 32; 12 seeds per population (FFL(0.8), the "
            "mixture); 2000 strings of FFL(0.8) and FFL(0.9), 10,000 of FFL(0.98), 1000 of FFL(0.1)",
            minutes=20.0,
            module="sandbox_lens.interp.experiments.ffl_mixture",
        ),
        Experiment(
            name="k-fold-composition",
            title="k-fold composition of permutations: final-only, mixed-hop and every-prefix data",
            section="arXiv 2505.23683 (the issue's reading), beside Theorem 10's prefix scan",
            claim="Composing k permutations is harder to learn from final states alone than from every prefix; a "
            "mixture of 1, 2, 4, …, k-fold data suffices; shorter hops are learned first; layer ℓ attends 2^(ℓ−1) "
            "back, as the prefix scan does; the twins run the scan (AA or PAA), by interchange interventions.",
            scale="S5 at k ∈ {8, 16}; twins of log₂ k layers (2 heads, width 64); 3000 steps × batch 32, 20 kept "
            "checkpoints; 5 seeds per supervision; 500 held-out words per k; 10 random-init twins per k; the "
            "every-prefix twins at k = 16 identified on 128 pairs per split, with DAS sites, beside 5 random-init nulls",
            minutes=30.0,
            takes=("automaton",),
            defaults={"automaton": "S5"},
            module="sandbox_lens.interp.experiments.k_fold_composition",
        ),
        Experiment(
            name="length-thresholds",
            title="Length thresholds: the training length after which twins generalise, on average and in ℓ∞",
            section="arXiv 2510.27015 (the issue's reading), beside §3.4.5.2.4",
            claim="Twins generalise to longer inputs only once trained on inputs past a threshold N*; N* grows with "
            "Dyck's depth D, and generalising without any error (ℓ∞) needs a longer N than on average.",
            scale="FFL(0.8) and Dyck_{2,D}, D ∈ {2, 3, 4}; 1 and 2 layers, no position embedding; trained at N ∈ {8, "
            "16, 32, 64} (800 steps × batch 32, 5 seeds each); tested on 200 inputs of 128 tokens with softmax and "
            "with hard attention",
            minutes=20.0,
            module="sandbox_lens.interp.experiments.length_thresholds",
        ),
        Experiment(
            name="indirect-supervision",
            title="Indirect supervision: twins trained on an observation of the state",
            section="§3.4.5.2.1, Fig. 3.18 (Fig. 3.7a)",
            claim="Transformers reach near-perfect accuracy when trained only on an observation of the state (C4's "
            "count mod 4 = 0, Grid9's walls, S5's π(1), D8's vertex location, Dyck_{4,8}'s stack top, (abab)* "
            "acceptance); the LSTM gets "
            "100% on all.",
            scale="T = 16; C4 observed as 1,0,0,0, grid9 as 1,0,…,0,1, D8 (its vertex location), the thesis's S5 as "
            "π(1), Dyck_{4,8} as its stack top, abab as accepting under two word laws; 3-block width-64 twins, up to "
            "2000 steps × batch 32, and the thesis's LSTM (up to 1500 steps); 6 seeds each",
            minutes=12.0,
            module="sandbox_lens.interp.experiments.indirect_supervision",
        ),
        Experiment(
            name="copying",
            title="Copying Dyck: interpretable-looking heads that cost little",
            section="§3.6.5, Figs. 3.41–3.43 (Proposition 6)",
            claim="1- and 4-layer transformers copy Dyck prefixes at > 90% and > 96%; their heads often attend to "
            "closing brackets or one bracket token, patterns that look interpretable but are uninformative for "
            "copying: ablating them barely changes the accuracy; with the other heads adapting, the heads that survive "
            "tend to be interpretable.",
            scale="Dyck_{2,4}, prefixes of ≤ 28 tokens; 1 and 4 layers, 1 head, width 50; 1000 steps × batch 32; "
            "10 seeds per depth; 400 held-out words; every head mean-ablated; learned head masks (200 steps, 0.1 "
            "nats per open head)",
            minutes=5.0,
            takes=("dyck",),
            defaults={"dyck": "2,4"},
            module="sandbox_lens.interp.experiments.copying",
        ),
        Experiment(
            name="scratchpad",
            title="A scratchpad with a recency bias: length generalisation",
            section="§3.4.5.2.3–4, Figs. 3.20–3.21 (D10)",
            claim="Transformers trained with the states written between the symbols (a scratchpad) and an explicit "
            "recency bias generalise to longer inputs; without the recency bias the scratchpad shows no improvement.",
            scale="parity and the Dyck stack (dyck2-depth4) at N = 16, tested at 16, 32, 64 (200 words each; "
            "scratchpads decoded autoregressively); plain, plain + ALiBi, scratchpad, scratchpad + ALiBi; 2 layers, "
            "8 heads, width 64; 1500 steps × batch 32; 5 seeds per population",
            minutes=13.0,
            takes=("automaton", "dyck"),
            defaults={"automaton": "parity", "dyck": "2,4"},
            module="sandbox_lens.interp.experiments.scratchpad",
        ),
        Experiment(
            name="algorithm-census",
            title="Which proven algorithm do plain twins learn?",
            section="§3.4.5, §3.6.3 (Theorems 1, 10, 11, Lemma 15)",
            claim="Trained transformers find other solutions than the constructions: few plain twins run one of the "
            "proven algorithms (prefix scan, counter, Krohn–Rhodes cascade, parity first, sequential; Dyck: stack).",
            scale="parity, C3, C4, S3, A4 at T = 8 and Dyck_{2,4} (15 brackets); 2 and 3 layers; width 64 (Dyck 50); up to "
            "3000 steps × batch 32; 10 seeds per population; interp align --candidates all on each learned twin "
            "(128 pairs per split, five random-init nulls)",
            minutes=60.0,
            module="sandbox_lens.interp.experiments.algorithm_census",
        ),
        Experiment(
            name="depth-sweep",
            title="How deep must a twin be to learn a group?",
            section="§3.4.5.1, Figs. 3.15/3.16 (and footnote 32)",
            claim="Q8 needs more layers than D8 (the wreath product against a semidirect one), and A4 more than A5 "
            "(richer supervision of the larger group).",
            scale="D8, Q8, A4, A5 acting on themselves at T = 16; 1, 2, 3, 4, 6 blocks of width 64; up to 1500 steps "
            "× batch 32; 5 seeds per cell; beside the prefix scan's and the Krohn–Rhodes cascade's depths",
            minutes=45.0,
            module="sandbox_lens.interp.experiments.depth_sweep",
        ),
        Experiment(
            name="algorithm-confusion",
            title="Does the identification name the algorithm a twin was made to run?",
            section="§3.4.5, §3.6.3 (Theorems 1, 10, 11, Lemma 15); issue 42's positive controls",
            claim="Twins trained to carry a proven algorithm at its construction's sites (interchange intervention "
            "training) are identified as that algorithm, and random-init twins as none of them.",
            scale="S3 prefix scan (6 blocks, its graph imposed) and Krohn–Rhodes cascade (4 blocks), C4 counter "
            "(2 blocks), Dyck_{2,4} stack (2 blocks) at T = 8 (Dyck 16), width 64 (the cascade 128, Dyck 50); up to "
            "6000 steps (the cascade 12000) × batch 32 until the imposed sites reach held-out IIA 0.99; 3 seeds each; "
            "3 random-init twins per task; interp align --candidates all on each (128 pairs per split, five "
            "random-init nulls)",
            # at ae4f1c8: 355 run-minutes trained two at a time (the cascade's 41–74 each), then 4.4 identifying
            minutes=185.0,
            module="sandbox_lens.interp.experiments.algorithm_confusion",
        ),
    )
}


def get_experiment(name: str) -> Experiment:
    """The experiment called ``name``, or a one-line error naming the known ones."""
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise ExperimentError(f"unknown experiment {name!r} (known: {', '.join(EXPERIMENTS)})") from None
