"""Named random streams: every purpose a random draw serves, and the seed it is drawn from.

A result that must reproduce draws from a generator named here, derived from the run's seed: the
generator of purpose ``P`` for run seed ``s`` at step ``t`` is ``numpy.random.default_rng([s + P.offset,
t, P.number])``. Two purposes never share a generator within a run (``tests/contract/test_streams.py``), and no
code outside this table numbers a stream. The numbers and offsets are those the streams had before
they were named, so training runs, checkpoints and reports keep their bits.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Stream", "ExperimentSeed", "rng", "entropy", "torch_seed"]


class Stream(enum.Enum):
    """What a random stream is for: ``(number, seed offset)``."""

    TRAIN_BATCHES = (0, 0)  # the training batch of each step (sandbox_lens.interp.train)
    HELD_OUT = (1, 0)  # the fixed held-out set a run is evaluated on
    ANALYSIS_WORDS = (2, 0)  # `interp compare`: the words probes, ablation and pruning read
    MASK_BATCHES = (3, 1000)  # `interp compare`: batches of the learned head masks
    THEOREM3_BATCHES = (4, 2000)  # `interp compare dyck`: batches of Theorem 3's weight mask
    EXAMPLE_SEARCH = (4, 0)  # `interp compare ffl`: candidate example strings
    EVALUATION = (5, 0)  # `interp evaluate`: the inputs of each shift (seed + shift index)
    POSITION_SHIFTS = (6, 0)  # training with --pos-shift: each step's offset
    CONTRASTIVE_PAIRS = (7, 0)  # training with --contrastive: the matched pairs put before an input
    GENERIC_VERIFY = (8, 0)  # verification of a kind with no verifier of its own: its task's batches
    PROBE_WORDS = (9, 0)  # experiments: words the probes read
    DROPOUT = (10, 0)  # training with dropout: the torch generator of each step (see torch_seed)
    RANDOM_BASELINE = (11, 0)  # `interp circuit --method random`: the baseline's edge scores
    CAUSAL_PAIRS = (13, 0)  # sandbox_lens.interp.causal: the base and source words of interchange interventions
    CAUSAL_CONTROL = (14, 0)  # sandbox_lens.interp.causal: the random subspaces of the matched-k control
    DAS_INIT = (15, 8000)  # sandbox_lens.interp.causal: DAS's initial rotation (a torch seed, see torch_seed)
    AUTO_CIRCUIT = (16, 9000)  # `interp circuit --method auto-circuit:...`: torch's global seed before the run
    ROTATION = (17, 10000)  # `interp build --rotate`: the random orthogonal embedding of the residual stream
    ALIGN_PAIRS = (18, 0)  # training with --align: each step's base and source words and swap positions
    CAUSAL_BOOTSTRAP = (19, 0)  # sandbox_lens.interp.causal.evidence: resampled base words (intervals, stability)
    ALIGN_HELD_OUT = (20, 0)  # training with --align: the fixed held-out pairs the imposed sites' IIA is read on
    RANDOM_AUTOMATON = (21, 0)  # the catalogue's random<n>-<k>-<seed>: its permutations (the name's seed)
    EDGE_MASKS = (12, 7000)  # `interp circuit --method masks`: the hard-concrete noise of each step (see torch_seed)
    UGS_MASKS = (22, 11000)  # `interp circuit --method ugs`: the uniform noise of each step's edge masks (torch_seed)

    @property
    def number(self) -> int:
        return self.value[0]

    @property
    def offset(self) -> int:
        return self.value[1]


class ExperimentSeed(enum.IntEnum):
    """The fixed seeds of the reproductions' shared test sets (the same words for every model and seed of an
    experiment, so its numbers reproduce; a run's own seed decides its training, not these)."""

    PARITY_OOD_EVALUATION = 1000  # parity-ood: the shifted test sets
    PARITY_OOD_PROBE_WORDS = 7  # parity-ood: the words the state probes read
    FFL_GLITCH_EVALUATION = 2000  # ffl-glitches: the test sets (+ the index of the p)
    FFL_GLITCH_ATTENTION_WORDS = 3000  # ffl-glitches: the words the attention scores read
    DYCK_BALANCE_IN_BAND = 4000  # dyck-balance: prefixes in the training band
    DYCK_BALANCE_OUT_OF_BAND = 4001  # dyck-balance: longer prefixes
    GRID_BOUNDARY_WORDS = 5000  # grid-boundary: the words the boundary scores read
    LENGTH_GENERALISATION = 6000  # length-generalisation: the test sets (+ the training length N)
    DYCK_SEEDS_WORDS = 11  # dyck-seeds: the words the attention variation reads
    PROBE_WORD = 0  # the one example word of a Dyck report when the thesis's does not fit
    PROBE_SPLIT = 0  # the train/test split of a linear probe
    ALGORITHM_PAIRS = 0  # algorithm-census, algorithm-confusion: the seed of the pairs and of the nulls
    ALGORITHM_FOLLOW_UP = 1  # algorithm-census: the fresh pairs on which an inconclusive twin is identified again
    DILUTION_STRINGS = 7000  # dilution: the strings every scaled construction reads (+ the length)
    UNIFORM_DYCK_WORDS = 8000  # uniform-dyck: the words the attention check reads
    RANDOM_AUTOMATA_WORDS = 9000  # random-automata: the held-out words (+ 100 × points + the length)
    PE_AT_2T_WORDS = 9500  # pe-at-2t: the test words at T and 2T
    PARITY_COUNTS_WORDS = 9700  # parity-counts: the words with a fixed count of the counted symbol
    FFL_ONE_HEAD_WORDS = 9800  # ffl-one-head: the words the head is read on (+ the index of the law)
    FFL_MIXTURE_EVALUATION = 9900  # ffl-mixture: the test sets (+ the index of the law)
    K_FOLD_WORDS = 9950  # k-fold-composition: the held-out words (+ k)
    LENGTH_THRESHOLD_WORDS = 9970  # length-thresholds: the test inputs
    COPYING_WORDS = 9980  # copying: the held-out words every head is read and ablated on
    SCRATCHPAD_WORDS = 9990  # scratchpad: the test words (+ their length)


def entropy(seed: int, purpose: Stream, step: int = 0) -> list[int]:
    """The seed sequence of ``purpose`` for run seed ``seed`` at ``step``."""
    if not isinstance(purpose, Stream):
        raise TypeError(f"a random stream is named by a Stream, got {purpose!r}")
    return [int(seed) + purpose.offset, int(step), purpose.number]


def rng(seed: int, purpose: Stream, step: int = 0) -> np.random.Generator:
    """The numpy generator of ``purpose`` for run seed ``seed`` at ``step``."""
    import numpy as np

    return np.random.default_rng(entropy(seed, purpose, step))


def torch_seed(seed: int, purpose: Stream, step: int = 0) -> int:
    """A torch generator's seed for ``purpose`` (dropout masks), unique per (seed, step) below 10^6 steps."""
    return int(seed) * 1_000_003 + int(step) + purpose.offset
