"""Two gloo processes on CPU: identical parameters on both ranks, equal to one process on the concatenated data."""

from __future__ import annotations

import os
import socket
import tempfile

import torch
import torch.multiprocessing as mp
from tensordict import TensorDict
from torch import nn

from mimic_rl.algorithms import MMPPO, Distillation
from mimic_rl.models import Actor, Critic
from mimic_rl.storage import RolloutStorageMM

N, T, D, A, ITERATIONS = 8, 6, 5, 3, 3


def _make(num_envs: int, multi_gpu_cfg=None, seed: int = 0) -> MMPPO:
    torch.manual_seed(seed)
    actor = Actor(D, A, hidden_dims=[16, 16], init_noise_std=0.7)
    critic = Critic(D, hidden_dims=[16, 16])
    storage = RolloutStorageMM("rl", num_envs, T, (D,), (None,), (None,), (None,), (A,))
    return MMPPO(actor, critic, storage, num_learning_epochs=2, num_mini_batches=1, desired_kl=0.001,
                 learning_rate=3e-3, multi_gpu_cfg=multi_gpu_cfg)  # fmt: skip


def _train(alg: MMPPO, rows: slice) -> dict[str, torch.Tensor]:
    """ITERATIONS updates on data of all 2N envs generated from fixed seeds, keeping this process's rows."""
    for it in range(ITERATIONS):
        g = torch.Generator().manual_seed(100 + it)
        for _ in range(T):
            obs = (torch.randn(2 * N, D, generator=g) * 2 + 1)[rows]
            noise = torch.randn(2 * N, A, generator=g)[rows]
            rewards = torch.randn(2 * N, generator=g)[rows]
            dones = (torch.rand(2 * N, generator=g) < 0.15)[rows]
            with torch.no_grad():
                mean, std = alg.actor.distribution(obs)
                actions = mean + std * noise
                tr = alg.storage.Transition()
                tr.observations, tr.actions, tr.rewards, tr.dones = obs, actions, rewards, dones
                tr.values = alg.critic(obs)
                tr.action_mean, tr.action_sigma = mean, std
                tr.actions_log_prob = torch.distributions.Normal(mean, std).log_prob(actions).sum(-1)
            alg.storage.add_transitions(tr)
        last = TensorDict({"policy": torch.randn(2 * N, D, generator=g)[rows]}, batch_size=[rows.stop - rows.start])
        alg.compute_returns(last)
        alg.update()
    state = {f"actor.{k}": v for k, v in alg.actor.state_dict().items()}
    state.update({f"critic.{k}": v for k, v in alg.critic.state_dict().items()})
    state["lr"] = torch.tensor(alg.learning_rate)
    return state


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_gloo_ranks_equal_one_process_on_concatenated_data():
    rank0, rank1 = _two_ranks("ppo")
    torch.set_num_threads(1)
    single = _train(_make(2 * N), slice(0, 2 * N))
    assert rank0.keys() == rank1.keys() == single.keys()
    for key in rank0:
        assert torch.equal(rank0[key], rank1[key]), key  # bitwise identical across ranks
        torch.testing.assert_close(rank0[key], single[key], atol=1e-5, rtol=1e-5, msg=key)
    assert float(single["actor.obs_normalizer.count"]) == 2 * N * T * ITERATIONS  # normalizers saw both ranks' data


def _make_distillation(num_envs: int, multi_gpu_cfg=None, seed: int = 0) -> Distillation:
    torch.manual_seed(seed)
    student = Actor(D, A, hidden_dims=[16, 16], rnn_type="gru", rnn_hidden_dim=8)
    teacher = nn.Linear(D, A)  # a fixed teacher; its actions come from the data below
    storage = RolloutStorageMM("distillation", num_envs, T, (D,), (None,), (None,), (None,), (A,))
    return Distillation(student, teacher, storage, gradient_length=4, learning_rate=3e-3, multi_gpu_cfg=multi_gpu_cfg)


def _distil(alg: Distillation, rows: slice) -> dict[str, torch.Tensor]:
    """ITERATIONS updates of a recurrent student on labels of all 2N envs from fixed seeds (this process's rows)."""
    for it in range(ITERATIONS):
        g = torch.Generator().manual_seed(200 + it)
        for _ in range(T):
            obs = (torch.randn(2 * N, D, generator=g) * 2 + 1)[rows]
            labels = torch.randn(2 * N, A, generator=g)[rows]
            dones = (torch.rand(2 * N, generator=g) < 0.15)[rows]
            with torch.no_grad():
                tr = alg.storage.Transition()
                if alg.storage.step == 0:
                    alg._rollout_hidden = alg.student.get_hidden_state()
                tr.observations, tr.actions, tr.privileged_actions = obs, alg.student(obs), labels
                tr.rewards, tr.dones = torch.zeros(rows.stop - rows.start), dones
            alg.storage.add_transitions(tr)
            alg.student.reset(dones)
        alg.update()
    return {f"student.{k}": v for k, v in alg.student.state_dict().items()}


def test_two_gloo_ranks_distil_like_one_process_on_concatenated_data():
    rank0, rank1 = _two_ranks("distillation")
    torch.set_num_threads(1)
    single = _distil(_make_distillation(2 * N), slice(0, 2 * N))
    for key in rank0:
        assert torch.equal(rank0[key], rank1[key]), key
        torch.testing.assert_close(rank0[key], single[key], atol=1e-5, rtol=1e-5, msg=key)
    assert float(single["student.obs_normalizer.count"]) == 2 * N * T * ITERATIONS


ALGORITHMS = {"ppo": (_make, _train), "distillation": (_make_distillation, _distil)}


def _worker(rank: int, world: int, port: int, out_dir: str, kind: str) -> None:
    """One rank: build ``kind``'s algorithm from a rank-specific seed (the constructor's broadcast from rank 0 must
    align the weights), train it on this rank's rows, save its state."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    make, train = ALGORITHMS[kind]
    try:
        alg = make(N, {"global_rank": rank, "local_rank": rank, "world_size": world}, seed=rank)
        torch.save(train(alg, slice(rank * N, (rank + 1) * N)), os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        torch.distributed.destroy_process_group()


def _two_ranks(kind: str) -> tuple[dict, dict]:
    """The states of two gloo ranks trained on N rows each."""
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_worker, args=(2, _free_port(), out_dir, kind), nprocs=2, join=True)
        return tuple(torch.load(os.path.join(out_dir, f"rank{r}.pt")) for r in range(2))
