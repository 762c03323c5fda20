"""The MMPPO update loop: PPO, imitation, mirror, AMP and RND terms on each mini-batch, then normalizers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDictBase
from torch import nn

from mimic_rl.algorithms import ppo_losses as L
from mimic_rl.errors import TrainingDiverged
from mimic_rl.models.distributions import gaussian_entropy, gaussian_kl, gaussian_log_prob
from mimic_rl.models.normalization import nonfinite_rows
from mimic_rl.storage import PPOBatch

if TYPE_CHECKING:
    from mimic_rl.algorithms.ppo import MMPPO

__all__ = ["run_update"]


def _actor_obs(alg: MMPPO, stored: Any) -> torch.Tensor:
    """The actor's observation vector from a stored mini-batch (a TensorDict of the actor's groups, or a tensor)."""
    if not isinstance(stored, TensorDictBase):
        return stored
    return alg.obs_groups.actor_obs(stored) if alg.obs_groups is not None else stored["policy"]


def _split(ref: tuple | None) -> tuple[Any, Any]:
    return (None, None) if ref is None else ref


def _batches(alg: MMPPO, epochs: int):
    st = alg.storage
    if alg.actor.is_recurrent or alg.critic.is_recurrent:
        return st.recurrent_mini_batch_generator(alg.num_mini_batches, epochs, alg.sequence_mode, alg.max_seq_len)
    return st.mini_batch_generator(alg.num_mini_batches, epochs)


def _flat(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Rows of a ``[L, B, ...]`` padded tensor as ``[L * B, ...]`` (no-op for flat batches)."""
    return x if mask is None else x.reshape(-1, *x.shape[2:])


def _amp_terms(alg: MMPPO, batch: PPOBatch) -> dict[str, torch.Tensor]:
    """Discriminator losses on the batch's policy pairs and its expert pairs (reference pairs or the sampler)."""
    amp = alg.amp
    masks = batch.masks
    p_prev, p_cur = _flat(batch.obs_prev_state, masks), _flat(batch.obs_cur_state, masks)
    p_valid = _flat(batch.amp_pair_valid, masks)
    e_prev = e_cur = e_valid = None
    if batch.ref_obs_prev_state is not None:
        e_prev, e_cur = _flat(batch.ref_obs_prev_state, masks), _flat(batch.ref_obs_cur_state, masks)
        e_valid = _flat(batch.ref_obs_prev_mask & batch.ref_obs_cur_mask, masks)
    if amp.batch_size is not None and p_prev.shape[0] > amp.batch_size:  # subsample the discriminator batch
        keep = torch.randperm(p_prev.shape[0], device=p_prev.device)[: amp.batch_size]
        p_prev, p_cur, p_valid = p_prev[keep], p_cur[keep], p_valid[keep]
        if e_prev is not None:
            e_prev, e_cur, e_valid = e_prev[keep], e_cur[keep], e_valid[keep]
    if e_prev is None:
        e_prev, e_cur = amp.sample_expert(p_prev.shape[0])
    if alg.symmetry is not None and alg.symmetry.mirror_amp is not None:
        m = alg.symmetry.mirror_amp
        p_prev, p_cur, p_valid = torch.cat((p_prev, m(p_prev))), torch.cat((p_cur, m(p_cur))), p_valid.repeat(2)
        e_prev, e_cur = torch.cat((e_prev, m(e_prev))), torch.cat((e_cur, m(e_cur)))
        e_valid = None if e_valid is None else e_valid.repeat(2)
    r_prev, r_cur, r_valid = amp.with_replay(p_prev, p_cur, p_valid)
    terms = amp.losses(r_prev, r_cur, r_valid, e_prev, e_cur, e_valid)
    terms["_policy_pairs"] = (p_prev.detach(), p_cur.detach(), p_valid)  # type: ignore[assignment]
    terms["_expert_states"] = (e_cur.detach(), e_valid)  # type: ignore[assignment]
    return terms


def _amp_pretrain(alg: MMPPO) -> None:
    """The discriminator's extra steps on the first rollout, before any policy update."""
    done = 0
    while done < alg.amp.pretrain_steps:
        for batch in alg.storage.mini_batch_generator(alg.num_mini_batches, 1):
            terms = _amp_terms(alg, batch)
            alg.amp.optimizer.zero_grad(set_to_none=True)
            terms["amp_total"].backward()
            if alg.is_multi_gpu:
                alg.reduce_parameters(alg.amp.discriminator.parameters())
            alg.amp.optimizer.step()
            done += 1
            if done >= alg.amp.pretrain_steps:
                break


def _ppo_terms(alg: MMPPO, batch: PPOBatch) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """PPO, imitation and mirror terms of one mini-batch; returns (terms, KL estimate)."""
    obs = _actor_obs(alg, batch.observations)
    ref, ref_mask = _split(batch.reference)
    critic_obs = _actor_obs(alg, batch.critic_observations)
    critic_ref, critic_mask = _split(batch.critic_reference)
    s = {
        "obs": obs,
        "ref": batch.reference,
        "critic_obs": critic_obs,
        "critic_ref": batch.critic_reference,
        "actions": batch.actions,
        "advantages": batch.advantages,
        "returns": batch.returns,
        "target_values": batch.target_values,
        "old_log_prob": batch.old_actions_log_prob,
        "old_mu": batch.old_mu,
        "old_sigma": batch.old_sigma,
        "dagger_actions": batch.dagger_actions,
    }
    n = obs.shape[0]
    mask = batch.loss_mask
    if alg.normalize_advantage_per_mini_batch:
        adv = s["advantages"]
        mean = L.masked_mean(adv, None if mask is None else mask.unsqueeze(-1))
        var = L.masked_mean((adv - mean).square(), None if mask is None else mask.unsqueeze(-1))
        s["advantages"] = (adv - mean) / (var.sqrt() + 1e-8)
    sym = alg.symmetry
    if sym is not None and sym.use_data_augmentation:
        s = sym.augment(s)
    ref, ref_mask = _split(s["ref"])
    critic_ref, critic_mask = _split(s["critic_ref"])
    hidden_a, hidden_c = batch.hidden_states if batch.hidden_states is not None else (None, None)
    mean, std = alg.actor.distribution(s["obs"], ref, ref_mask, hidden_state=hidden_a)
    values = alg.critic(s["critic_obs"], critic_ref, critic_mask, hidden_state=hidden_c)
    log_prob = gaussian_log_prob(s["actions"], mean, std)
    terms = {
        "surrogate": L.clipped_surrogate(
            log_prob, s["old_log_prob"].squeeze(-1), s["advantages"].squeeze(-1), alg.clip_param, mask
        ),
        "value": L.value_loss(
            values,
            s["target_values"],
            s["returns"],
            alg.clip_param,
            alg.use_clipped_value_loss,
            None if mask is None else mask.unsqueeze(-1),
        ),
        "entropy": L.masked_mean(gaussian_entropy(std[:n]), mask),
    }
    with torch.no_grad():
        kl = L.masked_mean(gaussian_kl(s["old_mu"][:n], s["old_sigma"][:n], mean[:n].detach(), std[:n].detach()), mask)
    if alg.dagger is not None:
        terms["imitation"] = L.masked_mean(alg.dagger.loss(mean, std, s["dagger_actions"]), mask)
    if sym is not None and (sym.use_mirror_loss or sym.use_data_augmentation):
        mirrored = mean[n:] if sym.use_data_augmentation else None
        ref_n = None if ref is None else ref[:n]
        mask_n = None if ref_mask is None else ref_mask[:n]
        terms["mirror"] = sym.mirror_loss(alg.actor, obs, ref_n, mask_n, mean[:n], mirrored)
    return terms, kl


def _total(alg: MMPPO, terms: dict[str, torch.Tensor]) -> torch.Tensor:
    loss = terms["surrogate"] + alg.value_loss_coef * terms["value"] - alg.entropy_coef * terms["entropy"]
    if "imitation" in terms:
        loss = loss + alg.dagger.coef(alg.iteration) * terms["imitation"]
    if "mirror" in terms and alg.symmetry.use_mirror_loss:
        loss = loss + alg.symmetry.mirror_loss_coeff * terms["mirror"]
    return loss


def _nonfinite_error(alg: MMPPO, terms: dict[str, torch.Tensor]) -> TrainingDiverged:
    bad = [k for k, v in terms.items() if isinstance(v, torch.Tensor) and not bool(torch.isfinite(v).all())]
    what = f"loss term(s) {bad}" if bad else "the gradient (all loss terms were finite)"
    return TrainingDiverged(
        f"MMPPO: {alg._nonfinite_streak} consecutive mini-batches had a non-finite loss or gradient; last: {what}. "
        "Check observations and rewards for NaN/inf, or lower the learning rate"
    )


def run_update(alg: MMPPO) -> dict[str, float]:
    """One PPO update over the stored rollout (see ``MMPPO.update``)."""
    amp, rnd, st = alg.amp, alg.rnd, alg.storage
    if amp is not None and amp.num_steps == 0 and amp.pretrain_steps > 0:
        _amp_pretrain(alg)
    sums: dict[str, torch.Tensor] = {}
    counted, lr_sum, last_kl = 0, 0.0, None
    step = 0
    ppo_params = [*alg.actor.parameters(), *alg.critic.parameters()]
    expert_states: list[tuple] = []
    autocast = torch.autocast(alg.device.type, dtype=torch.bfloat16, enabled=alg.use_mixed_precision)
    for batch in _batches(alg, alg.num_learning_epochs):
        with autocast:
            terms, kl = _ppo_terms(alg, batch)
            loss = _total(alg, terms)
            use_amp = amp is not None and step % amp.update_interval == 0
            if use_amp:
                amp_terms = _amp_terms(alg, batch)
                policy_pairs = amp_terms.pop("_policy_pairs")
                expert_states.append(amp_terms.pop("_expert_states"))
                terms.update(amp_terms)
            if rnd is not None:
                rnd_mask = None if batch.masks is None else batch.masks.reshape(-1)
                terms["rnd"] = rnd.loss(_flat(batch.rnd_state, batch.masks), rnd_mask)
        alg.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        params = list(ppo_params)
        if use_amp:
            amp.optimizer.zero_grad(set_to_none=True)
            terms["amp_total"].backward()
            params += list(amp.discriminator.parameters())
        if rnd is not None:
            rnd.optimizer.zero_grad(set_to_none=True)
            terms["rnd"].backward()
            params += list(rnd.predictor.parameters())
        if alg.is_multi_gpu:
            alg.reduce_parameters(params)
        norms = [
            nn.utils.clip_grad_norm_(alg.actor.parameters(), alg.max_grad_norm),
            nn.utils.clip_grad_norm_(alg.critic.parameters(), alg.max_grad_norm),
        ]
        if use_amp:
            norms.append(nn.utils.clip_grad_norm_(amp.discriminator.parameters(), float("inf")))
        check = torch.stack([kl.float(), torch.stack([loss.float(), *norms]).isfinite().all().logical_not().float()])
        if alg.is_multi_gpu:  # the same KL and skip decision on every rank
            torch.distributed.all_reduce(check)
            check[0] /= alg.gpu_world_size
        kl_value, nonfinite = check.tolist()  # the one host sync of a mini-batch
        step += 1
        if nonfinite > 0:
            alg.nonfinite_batches += 1
            alg._nonfinite_streak += 1
            if alg._nonfinite_streak >= alg.max_nonfinite_batches:
                raise _nonfinite_error(alg, terms)
            continue
        alg._nonfinite_streak = 0
        if alg.schedule == "adaptive" and alg.desired_kl is not None:
            _set_learning_rate(alg, L.adapt_learning_rate(alg.learning_rate, kl_value, alg.desired_kl))
        lr_sum += alg.learning_rate
        last_kl = kl_value
        alg.optimizer.step()
        if use_amp:
            amp.optimizer.step()
            amp.num_steps += 1
            amp.push_replay(*policy_pairs)
        if rnd is not None:
            rnd.optimizer.step()
        counted += 1
        terms["kl"] = kl
        for key, value in terms.items():
            sums[key] = sums.get(key, 0.0) + value.detach().float()
    if alg.schedule == "adaptive_update" and alg.desired_kl is not None and last_kl is not None:
        _set_learning_rate(alg, L.adapt_learning_rate(alg.learning_rate, last_kl, alg.desired_kl))
    _update_normalizers(alg, expert_states)
    alg.actor.head.check()
    alg.iteration += 1
    st.clear()
    out = {key: value / max(1, counted) for key, value in sums.items()}
    result = {k: float(v) for k, v in zip(out, torch.stack(list(out.values())).tolist())} if out else {}
    result["learning_rate"] = lr_sum / max(1, counted)  # the mean rate the update used (it changes per mini-batch)
    result["learning_rate_next"] = alg.learning_rate
    result["nonfinite_batches"] = float(alg.nonfinite_batches)
    result["nonfinite_obs_rows"] = float(nonfinite_rows(*alg._modules()))
    return result


def _set_learning_rate(alg: MMPPO, rate: float) -> None:
    """The actor's learning rate (and the critic's, unless it has a rate of its own)."""
    alg.learning_rate = rate
    for group in alg.optimizer.param_groups[: 1 if alg.critic_learning_rate else None]:
        group["lr"] = rate


@torch.no_grad()
def _update_normalizers(alg: MMPPO, expert_states: list[tuple]) -> None:
    """Once per iteration, after the update, with the raw observations of the whole rollout."""
    st = alg.storage
    obs = _actor_obs(alg, st.observations).flatten(0, 1)
    ref = st.reference_observations.flatten(0, 1) if st.reference_observations is not None else None
    ref_mask = st.reference_observations_mask.flatten(0, 1) if st.reference_observations_mask is not None else None
    alg.actor.update_normalization(obs, ref, ref_mask)
    if st.privileged_observations is not None:
        critic_obs = st.privileged_observations.flatten(0, 1)
    else:
        critic_obs = obs
    if st.privileged_reference_observations is not None:
        critic_ref = st.privileged_reference_observations.flatten(0, 1)
        critic_mask = st.privileged_reference_observations_mask.flatten(0, 1)
    else:
        critic_ref, critic_mask = ref, ref_mask
    alg.critic.update_normalization(critic_obs, critic_ref, critic_mask)
    if alg.rnd is not None and st.rnd_state is not None:
        alg.rnd.update_normalization(st.rnd_state.flatten(0, 1))
    if alg.amp is not None:
        policy_features = alg._amp_features(st.observations.flatten(0, 1))
        alg.amp.update_normalization(policy_features)
        if expert_states:
            states = torch.cat([e[0] for e in expert_states])
            valid = [e[1] for e in expert_states]
            mask = None if any(v is None for v in valid) else torch.cat(valid)
            alg.amp.update_normalization(states, mask)
