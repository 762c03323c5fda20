"""Models: normalizer, Gaussian head, reference encoders, recurrent core, schedules — against independent values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mimic_rl.algorithms.schedules import Schedule
from mimic_rl.models import (
    Actor,
    Critic,
    EmpiricalNormalizer,
    GaussianHead,
    MLPReferenceEncoder,
    TransformerReferenceEncoder,
    gaussian_entropy,
    gaussian_kl,
    gaussian_log_prob,
)


def test_normalizer_matches_numpy_over_several_updates_and_masks():
    g = torch.Generator().manual_seed(0)
    norm = EmpiricalNormalizer(3, eps=0.0)
    chunks = [
        torch.randn(50, 3, generator=g) * 3 + 1,
        torch.randn(70, 3, generator=g) - 2,
        torch.randn(5, 3, generator=g),
    ]
    masks = [None, torch.rand(70, generator=g) > 0.5, torch.zeros(5, dtype=torch.bool)]
    kept = []
    for x, m in zip(chunks, masks):
        norm.update(x, m)
        kept.append(x if m is None else x[m])
    ref = torch.cat(kept).double().numpy()
    np.testing.assert_allclose(norm.mean.numpy(), ref.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(norm.var.numpy(), ref.var(0), rtol=1e-5, atol=1e-5)
    assert float(norm.count) == len(ref)
    x = torch.randn(4, 3, generator=g)
    torch.testing.assert_close(norm(x), (x - norm.mean) / norm.var.sqrt())
    torch.testing.assert_close(norm.inverse(norm(x)), x)


def test_normalizer_kept_denominator_follows_every_change_of_its_statistics():
    """``forward`` keeps ``std + eps`` between calls: after an update, a state-dict load, an in-place write, a dtype
    move, and from inference mode into a backward, it must equal the formula on the current statistics."""
    g = torch.Generator().manual_seed(3)
    norm = EmpiricalNormalizer(3, eps=0.1)
    x = torch.randn(5, 3, generator=g)

    def formula(t: torch.Tensor) -> torch.Tensor:
        return (t - norm.mean) / (norm.var.sqrt() + 0.1)

    torch.testing.assert_close(norm(x), x / 1.1, rtol=0, atol=0)
    norm.update(torch.randn(40, 3, generator=g) * 4)
    assert norm(x).equal(formula(x))  # bitwise: the same operations as before the cache
    other = EmpiricalNormalizer(3, eps=0.1)
    other.update(torch.randn(30, 3, generator=g) + 7)
    norm.load_state_dict(other.state_dict())
    assert norm(x).equal(formula(x)) and norm(x).equal(other(x))
    norm.var.mul_(9.0)
    assert norm(x).equal(formula(x))
    norm.eps = 0.5
    torch.testing.assert_close(norm(x), (x - norm.mean) / (norm.var.sqrt() + 0.5))
    norm.double()
    assert norm(x.double()).dtype == torch.float64
    torch.testing.assert_close(norm.inverse(norm(x.double())), x.double())
    norm.float()
    with torch.inference_mode():
        norm(x)  # the first call after the move: kept while in inference mode
    y = x.clone().requires_grad_(True)
    norm(y).sum().backward()  # fails if the kept tensor were an inference tensor
    torch.testing.assert_close(y.grad, (1.0 / (norm.var.sqrt() + 0.5)).expand(5, 3))


def test_gaussian_math_matches_torch_distributions():
    g = torch.Generator().manual_seed(1)
    mu, sigma = torch.randn(6, 4, generator=g), torch.rand(6, 4, generator=g) + 0.2
    mu2, sigma2 = torch.randn(6, 4, generator=g), torch.rand(6, 4, generator=g) + 0.2
    a = torch.randn(6, 4, generator=g)
    ref = torch.distributions.Normal(mu, sigma)
    torch.testing.assert_close(gaussian_log_prob(a, mu, sigma), ref.log_prob(a).sum(-1))
    torch.testing.assert_close(gaussian_entropy(sigma), ref.entropy().sum(-1))
    kl = torch.distributions.kl_divergence(ref, torch.distributions.Normal(mu2, sigma2)).sum(-1)
    torch.testing.assert_close(gaussian_kl(mu, sigma, mu2, sigma2), kl)


@pytest.mark.parametrize("std_type", ["scalar", "log"])
def test_gaussian_head_bound_and_non_finite_error(std_type):
    head = GaussianHead(3, init_std=0.5, std_type=std_type, min_std=0.1)
    torch.testing.assert_close(head.std(), torch.full((3,), 0.5))
    param = head.std_param if std_type == "scalar" else head.log_std_param
    with torch.no_grad():
        param.fill_(-10.0)
    torch.testing.assert_close(head.std(), torch.full((3,), 0.1))  # lower bound
    with torch.no_grad():
        param[1] = float("nan")
    with pytest.raises(FloatingPointError, match="action std is not finite"):
        head.check()
    with pytest.raises(ValueError, match="std_type"):
        GaussianHead(3, std_type="softplus")


@pytest.mark.parametrize("cls", [MLPReferenceEncoder, TransformerReferenceEncoder])
def test_reference_encoders_zero_masked_rows_and_feed_the_mask(cls):
    torch.manual_seed(0)
    enc = cls((3, 4))
    ref = torch.randn(5, 3, 4)
    mask = torch.tensor([True, False, True, False, True])
    out = enc(ref, mask)
    assert out.shape == (5, enc.output_dim)
    assert torch.equal(out[:, -1], mask.float())
    assert torch.all(out[~mask][:, :-1] == 0)
    assert torch.all(out[mask][:, :-1].abs().sum(-1) > 0)
    # a masked env's reference does not matter; a valid env's does
    ref2 = ref.clone()
    ref2[1] += 5.0
    ref2[0, 2] += 5.0
    out2 = enc(ref2, mask)
    assert torch.equal(out2[1], out[1]) and not torch.allclose(out2[0], out[0])
    assert torch.equal(out2[2:], out[2:])
    # leading dims [L, B] work and match the flat call
    torch.testing.assert_close(enc(ref.reshape(1, 5, 3, 4), mask.reshape(1, 5))[0], out)


def _layer_norm(x: torch.Tensor, norm: torch.nn.LayerNorm) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).square().mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias


def _attention(x: torch.Tensor, keep: torch.Tensor, attn: torch.nn.MultiheadAttention) -> torch.Tensor:
    """Multi-head self-attention over ``x`` ``[B, S, d]`` with keys ``keep`` ``[B, S]`` (False: never attended)."""
    b, s, d = x.shape
    h = attn.num_heads
    q, k, v = (x @ attn.in_proj_weight.T + attn.in_proj_bias).split(d, dim=-1)
    q, k, v = (y.reshape(b, s, h, d // h).transpose(1, 2) for y in (q, k, v))  # [B, h, S, d / h]
    scores = q @ k.transpose(-1, -2) / (d // h) ** 0.5
    scores = scores.masked_fill(~keep[:, None, None, :], float("-inf"))
    heads = scores.softmax(-1) @ v
    return heads.transpose(1, 2).reshape(b, s, d) @ attn.out_proj.weight.T + attn.out_proj.bias


def test_transformer_encoder_matches_a_hand_written_transformer():
    """The encoder, written out: tokens ``[summary; embed(frame_k) + position_k]``, post-norm encoder layers
    (self-attention whose keys leave out the frames of envs without a reference, then a ReLU feed-forward), the
    summary token's output projected, times the mask, with the mask appended.

    Catches: a frame token without its position, the latent read off another token than the summary, the key
    padding applied to the wrong tokens, a layer skipped or applied in another order."""
    torch.manual_seed(0)
    enc = TransformerReferenceEncoder((3, 4), latent_dim=5, d_model=8, num_heads=2, num_layers=2, dim_feedforward=16)
    with torch.no_grad():
        enc.summary.normal_()
        enc.position.normal_()
    ref = torch.randn(6, 3, 4)
    mask = torch.tensor([True, False, True, True, False, True])
    with torch.no_grad():
        frames = ref @ enc.embed.weight.T + enc.embed.bias + enc.position
        x = torch.cat((enc.summary.expand(6, 1, 8), frames), dim=1)
        keep = torch.cat((torch.ones(6, 1, dtype=torch.bool), mask[:, None].expand(6, 3)), dim=1)
        for layer in enc.encoder.layers:
            x = _layer_norm(x + _attention(x, keep, layer.self_attn), layer.norm1)
            hidden = torch.relu(x @ layer.linear1.weight.T + layer.linear1.bias)
            x = _layer_norm(x + hidden @ layer.linear2.weight.T + layer.linear2.bias, layer.norm2)
        m = mask.float().unsqueeze(-1)
        expected = torch.cat(((x[:, 0] @ enc.out.weight.T + enc.out.bias) * m, m), dim=-1)
        torch.testing.assert_close(enc(ref, mask), expected, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(enc(ref.reshape(2, 3, 3, 4), mask.reshape(2, 3)), expected.reshape(2, 3, 6))
        # one frame of one env changes that env's latent only
        moved = ref.clone()
        moved[2, 1] += 1.0
        diff = (enc(moved, mask) - enc(ref, mask)).abs().sum(-1)
    assert float(diff[2]) > 1e-4 and float(diff.sum() - diff[2]) == 0


def test_transformer_key_padding_all_masked_batch_is_finite():
    enc = TransformerReferenceEncoder((2, 3))
    out = enc(torch.randn(4, 2, 3), torch.zeros(4, dtype=torch.bool))
    assert torch.isfinite(out).all() and torch.all(out == 0)


@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
def test_recurrent_actor_steps_equal_sequence_run(rnn_type):
    torch.manual_seed(0)
    actor = Actor(5, 2, ref_shape=(6,), hidden_dims=[16], rnn_type=rnn_type, rnn_hidden_dim=8)
    T, N = 4, 3
    obs, ref, mask = torch.randn(T, N, 5), torch.randn(T, N, 6), torch.rand(T, N) > 0.3
    stepped = []
    first_hidden = None
    for t in range(T):
        if t == 1:
            first_hidden = actor.get_hidden_state()
        stepped.append(actor.distribution(obs[t], ref[t], mask[t])[0])
    stepped = torch.stack(stepped)
    # run steps 1..T-1 as one sequence from the state stored before step 1
    seq, _ = actor.distribution(obs[1:], ref[1:], mask[1:], hidden_state=first_hidden)
    torch.testing.assert_close(seq, stepped[1:], atol=1e-6, rtol=1e-5)
    # reset zeros only the done envs
    actor.reset(torch.tensor([True, False, False]))
    h = actor.get_hidden_state()
    h = h[0] if isinstance(h, tuple) else h
    assert torch.all(h[:, 0] == 0) and torch.any(h[:, 1] != 0)


def test_critic_peek_does_not_advance_recurrent_state():
    critic = Critic(4, rnn_type="gru", rnn_hidden_dim=8, hidden_dims=[8])
    critic(torch.randn(3, 4))
    before = critic.get_hidden_state().clone()
    x = torch.randn(3, 4)
    peek = critic.peek(x)
    assert torch.equal(critic.get_hidden_state(), before)
    torch.testing.assert_close(peek, critic(x))  # the same value as actually stepping


def test_schedules():
    assert Schedule.from_any(0.3)(100) == 0.3
    step = Schedule.from_any({"mode": "step", "initial": 1.0, "final": 0.1, "end": 10})
    assert (step(9), step(10)) == (1.0, 0.1)
    lin = Schedule.from_any({"mode": "linear", "initial": 1.0, "final": 0.0, "start": 10, "end": 20})
    assert (lin(0), lin(15), lin(25)) == (1.0, 0.5, 0.0)
    exp = Schedule.from_any({"mode": "exponential", "initial": 1.0, "final": 0.2, "decay": 0.5})
    assert (exp(1), exp(2), exp(5)) == (0.5, 0.25, 0.2)
    with pytest.raises(ValueError, match="unknown key"):
        Schedule.from_any({"mode": "linear", "slope": 1})
    with pytest.raises(ValueError, match="mode"):
        Schedule.from_any({"mode": "cosine"})
