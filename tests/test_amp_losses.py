"""The discriminator's losses against a second implementation: each set's terms written out one by one, and R1 as
the input gradient from autograd (a double backward), as the AMP papers state it."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from mimic_rl.algorithms.amp import AMP


def reference_losses(amp: AMP, p_prev, p_cur, p_valid, e_prev, e_cur, e_valid) -> dict[str, torch.Tensor]:
    """The losses computed per set, with masked means and R1 by ``autograd.grad(create_graph=True)``."""
    disc = amp.discriminator

    def mean(x: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
        if valid is None:
            return x.mean()
        return (x * valid).sum() / valid.sum().clamp(min=1)

    d_policy = disc(disc.normalize(p_prev, p_cur))
    expert_input = disc.normalize(e_prev, e_cur).detach().requires_grad_(True)
    d_expert = disc(expert_input)
    if amp.loss_type == "bce":
        s = amp.label_smoothing
        l_policy = F.binary_cross_entropy_with_logits(d_policy, torch.full_like(d_policy, s), reduction="none")
        l_expert = F.binary_cross_entropy_with_logits(d_expert, torch.full_like(d_expert, 1 - s), reduction="none")
    elif amp.loss_type == "lsgan":
        l_policy, l_expert = (d_policy + 1) ** 2, (d_expert - 1) ** 2
    else:
        l_policy, l_expert = d_policy, -d_expert
    loss = mean(l_policy, p_valid) + mean(l_expert, e_valid)
    if amp.loss_type != "wgan":
        loss = loss / 2
    (grad,) = torch.autograd.grad(d_expert.sum(), expert_input, create_graph=True)
    penalty = mean((grad**2).sum(-1), e_valid)
    return {
        "amp_loss": loss,
        "amp_grad_penalty": penalty,
        "amp_total": loss + amp.gradient_penalty_coef * penalty,
        "amp_policy_accuracy": mean((d_policy < 0).float(), p_valid),
        "amp_expert_accuracy": mean((d_expert > 0).float(), e_valid),
    }


@pytest.mark.parametrize(
    ("loss_type", "activation", "masks"),
    [
        ("lsgan", "relu", "both"),
        ("lsgan", "relu", "none"),
        ("bce", "relu", "expert"),
        ("wgan", "relu", "policy"),
        ("lsgan", "elu", "both"),  # not a ReLU: the input gradient from autograd
        ("bce", "tanh", "none"),
    ],
)
def test_losses_and_their_gradients_match_a_second_implementation(loss_type, activation, masks):
    torch.manual_seed(0)
    amp = AMP(num_features=5, hidden_dims=(16, 8), activation=activation, loss_type=loss_type, label_smoothing=0.1)
    assert amp.discriminator.relu == (activation == "relu")
    with torch.no_grad():  # normalization statistics away from 0 / 1, so that a missed normalization shows
        amp.discriminator.normalizer.update(torch.randn(500, 5) * 3 + 1)
    n, m = 12, 9
    p_prev, p_cur, e_prev, e_cur = torch.randn(n, 5), torch.randn(n, 5), torch.randn(m, 5), torch.randn(m, 5)
    p_valid = torch.rand(n) > 0.3 if masks in ("both", "policy") else None
    e_valid = torch.rand(m) > 0.3 if masks in ("both", "expert") else None
    if e_valid is not None:
        e_valid[0] = False  # an invalid expert row whose R1 term must not count
    params = list(amp.discriminator.parameters())
    ours = amp.losses(p_prev, p_cur, p_valid, e_prev, e_cur, e_valid)
    ref = reference_losses(amp, p_prev, p_cur, p_valid, e_prev, e_cur, e_valid)
    assert ours.keys() == ref.keys()
    for key in ref:
        torch.testing.assert_close(ours[key], ref[key], rtol=1e-5, atol=1e-6, msg=key)
    assert float(ref["amp_grad_penalty"].detach()) > 1e-4  # a penalty that is there to compare
    for g_ours, g_ref in zip(
        torch.autograd.grad(ours["amp_total"], params), torch.autograd.grad(ref["amp_total"], params)
    ):
        torch.testing.assert_close(g_ours, g_ref, rtol=1e-4, atol=1e-6)
    # the same call again, with other shapes (the row weights are kept per shape)
    again = amp.losses(p_prev[:5], p_cur[:5], None, e_prev, e_cur, e_valid)
    torch.testing.assert_close(
        again["amp_total"], reference_losses(amp, p_prev[:5], p_cur[:5], None, e_prev, e_cur, e_valid)["amp_total"]
    )


def test_penalty_of_a_linear_discriminator_by_hand():
    """No hidden layer: D(x) = w.x + b, so the input gradient is w for every row and R1 is |w|^2."""
    amp = AMP(num_features=2, hidden_dims=(), loss_type="lsgan")
    assert amp.discriminator.relu  # vacuously: the written-out gradient is the output weight itself
    with torch.no_grad():
        amp.discriminator.net.last.weight.copy_(torch.tensor([[1.0, -2.0, 0.5, 3.0]]))
        amp.discriminator.net.last.bias.fill_(0.25)
    x = torch.zeros(3, 2)  # normalized to 0 (fresh normalizer: mean 0, var 1): D = 0.25 on every row
    out = amp.losses(x, x, None, x, x, None)
    torch.testing.assert_close(out["amp_grad_penalty"], torch.tensor(1 + 4 + 0.25 + 9.0))
    # lsgan: ((0.25 + 1)^2 + (0.25 - 1)^2) / 2
    torch.testing.assert_close(out["amp_loss"], torch.tensor((1.25**2 + 0.75**2) / 2))
    assert float(out["amp_policy_accuracy"]) == 0.0 and float(out["amp_expert_accuracy"]) == 1.0
