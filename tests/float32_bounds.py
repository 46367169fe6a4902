"""How far two float32 runs of the same weights may differ: rounding bounded by float32's epsilon times the sum of
the absolute values each summation adds up (its condition), not a fixed 1e-5.

A counter's staircase MLP adds ~10⁴ in absolute terms to make outputs of ~5, so two correct float32 runs that sum
in different orders (the bare forward and TransformerLens 4's bridge) differ by ~5·10⁻³ in the logits there; a
fixed relative tolerance passes on one machine and fails on another."""

import torch

EPS32 = float(torch.finfo(torch.float32).eps)


def logit_bound(model, stream: dict, slack: float = 8.0) -> float:
    """A bound on the float32 logit error of ``model`` (no LayerNorm) on the inputs whose residual ``stream`` (the
    bare forward's, by hook name) is given: ``slack`` × ε × (the largest absolute sum any block's attention or MLP
    adds into the stream, plus the stream's own size) × the unembedding's largest absolute column sum."""
    from sandbox_lens.interp.model.hooked import tl_state_dict

    assert getattr(model.cfg, "normalization_type", None) is None, "the bound ignores LayerNorm"
    sd = {k: v.detach().double() for k, v in tl_state_dict(model).items()}
    worst = max(float(v.abs().max()) for v in stream.values())
    for l in range(model.cfg.n_layers):
        x = stream[f"blocks.{l}.hook_resid_pre"].double().abs()
        W_V, W_O = sd[f"blocks.{l}.attn.W_V"].abs(), sd[f"blocks.{l}.attn.W_O"].abs()
        values = torch.einsum("...d,hde->...he", x, W_V)  # every head's value, in absolute terms
        worst = max(worst, float(torch.einsum("...he,hed->...d", values, W_O).max()))
        mid = stream[f"blocks.{l}.hook_resid_mid"].double()
        hidden = torch.relu(mid @ sd[f"blocks.{l}.mlp.W_in"] + sd[f"blocks.{l}.mlp.b_in"])
        worst = max(worst, float((hidden.abs() @ sd[f"blocks.{l}.mlp.W_out"].abs()).max()))
    return slack * EPS32 * worst * float(sd["unembed.W_U"].abs().sum(0).max())
