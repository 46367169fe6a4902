"""scratchpad: the autoregressive decoder against an oracle, the effect code on synthetic twins, the quick run and
the refusals."""

from __future__ import annotations

import numpy as np
import pytest

from sandbox_lens.interp.errors import SandboxError
from sandbox_lens.interp.experiments import get_experiment, run_experiment
from sandbox_lens.interp.experiments.base import Context
from sandbox_lens.interp.experiments.scratchpad import _report, alone_effect, fill_scratchpad, recency_effect
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.variants import ScratchpadTask


class _Oracle:
    """Reads its own scratchpad: q_t = δ(q_{t−1}, σ_t) from the state token before σ_t (the start state at σ_1), or
    a wrong state when ``lie_after`` says so — what it wrote is what the next step reads."""

    def __init__(self, task: ScratchpadTask, lie_at: int | None = None) -> None:
        self.task, self.lie_at, self.cfg = task, lie_at, None

    def __call__(self, tokens):
        import torch

        a, tok = self.task.automaton, tokens.cpu().numpy()
        n, length = tok.shape
        logits = np.zeros((n, length, a.n_states), dtype=np.float32)
        for i in range(1, length, 2):
            prev = np.full(n, a.initial) if i == 1 else tok[:, i - 1] - 1 - a.n_symbols
            q = a.delta[tok[:, i] - 1, prev]
            if self.lie_at == i // 2:
                q = (q + 1) % a.n_states
            logits[np.arange(n), i, q] = 1.0
        return torch.as_tensor(logits)

    def parameters(self):
        import torch

        yield torch.zeros(1)


@pytest.fixture
def parity():
    return ScratchpadTask(get_automaton("parity"), 6)


def test_the_decoder_feeds_back_what_it_wrote(parity):
    a = parity.automaton
    words = a.sample(20, 6, np.random.default_rng(0))
    assert (fill_scratchpad(_Oracle(parity), parity, words) == a.run(words)).all()
    # one wrong state at t = 2 flips every parity state after it: the errors compound, as autoregression does
    wrong = fill_scratchpad(_Oracle(parity, lie_at=2), parity, words) != a.run(words)
    assert not wrong[:, :2].any() and wrong[:, 2:].all()


def _twins(at_n: list[float], at_4n: list[float]) -> dict:
    return {s: {"1": a, "2": (a + b) / 2, "4": b} for s, (a, b) in enumerate(zip(at_n, at_4n))}


def test_effects_count_only_the_learned_twins():
    twins = _twins([1.0, 0.99, 0.5, 1.0], [0.9, 0.8, 1.0, 0.7])  # seed 2 did not learn: its 1.0 at 4N is not counted
    e = recency_effect(twins, "4")
    assert e.n == 3 and e.value == pytest.approx(0.8)
    d = alone_effect(twins, _twins([1.0, 1.0, 1.0], [0.5, 0.6, 0.7]), "4")
    assert d.value == pytest.approx(0.8 - 0.6) and d.n == 3


@pytest.mark.parametrize(
    "recency, scratch, verdicts",
    [
        # ALiBi keeps 0.99+, the scratchpad alone matches the plain twins: both claims hold
        ([0.995, 0.998, 1.0, 0.997, 0.999], [0.60, 0.62, 0.58, 0.61, 0.59], ("reproduced", "reproduced")),
        # ALiBi falls to 0.7; the scratchpad alone gains 0.3 over plain: neither holds
        ([0.70, 0.72, 0.68, 0.71, 0.69], [0.90, 0.92, 0.88, 0.91, 0.89], ("not reproduced", "not reproduced")),
    ],
)
def test_the_rules_on_synthetic_twins(tmp_path, recency, scratch, verdicts):
    plain = _twins([1.0] * 5, [0.60, 0.61, 0.59, 0.60, 0.60])
    arms = {
        "plain": plain,
        "plain + ALiBi": plain,
        "scratchpad": _twins([1.0] * 5, scratch),
        "scratchpad + ALiBi": _twins([1.0] * 5, recency),
    }
    ctx = Context(get_experiment("scratchpad"), tmp_path, quick=False, seeds=list(range(5)))
    _report(ctx, {"parity": arms}, {"length": 16, "multiples": (1, 2, 4)})
    assert tuple(c["verdict"] for c in ctx.claims) == verdicts


def test_scratchpad_quick(tmp_path_factory):
    from tests.experiments.test_experiments import check_files

    out = tmp_path_factory.mktemp("scratchpad") / "out"
    r = run_experiment(get_experiment("scratchpad"), out, quick=True, options={})
    check_files(out, r)
    acc = r["data"]["accuracy"]
    assert set(acc) == {"parity", "dyck"} and set(acc["parity"]) == {
        "plain",
        "plain + ALiBi",
        "scratchpad",
        "scratchpad + ALiBi",
    }
    assert r["settings"]["parity/scratchpad + ALiBi"]["task"]["kind"] == "scratchpad"
    assert r["settings"]["parity/scratchpad + ALiBi"]["shape"]["positional"] == "alibi"


def test_scratchpad_refuses_an_unknown_automaton(tmp_path):
    with pytest.raises(SandboxError, match="unknown automaton 'nope'"):
        run_experiment(get_experiment("scratchpad"), tmp_path / "o", quick=True, options={"automaton": "nope"})
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("positional", ["learned", "alibi"])
def test_the_cached_decoder_writes_what_the_full_one_writes(tmp_path, positional):
    from sandbox_lens.interp.model.hooked import backend
    from sandbox_lens.interp.train import ModelShape, TrainConfig, load_trained, train

    if positional == "alibi" and backend() != "HookedTransformer":
        pytest.skip("ALiBi needs TransformerLens 3.9")
    task = ScratchpadTask(get_automaton("C3"), 4)
    shape = ModelShape(n_layers=2, n_heads=8, positional=positional, n_ctx=24)
    train(task, shape, TrainConfig(steps=30, eval_every=30, target_accuracy=None), tmp_path / "r", progress=False)
    model = load_trained(tmp_path / "r")
    words = task.automaton.sample(16, 12, np.random.default_rng(3))
    assert (fill_scratchpad(model, task, words) == fill_scratchpad(model, task, words, cached=False)).all()
