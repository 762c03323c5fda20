"""RolloutBuffer: a preallocated, time-major rollout of named fields whose interface is a TensorDict.

The fields come from a *spec* of one step of all envs and live in a ``PackedStore`` (every float32 field packed in
one ``[T + 1, N, F]`` tensor, every bool flag in one bool tensor, other dtypes in loose stores), so that one
``index_select`` per store fetches a mini-batch. Row 0 of every store is the *carry* row: the last stored step of the
previous rollout, which gives step 0 its previous step.

A collector fills a rollout either in place, through the ``[T, N]`` TensorDict of views that ``start_rollout()``
returns (``buf[t] = step_td`` or ``buf["actions"][t].copy_(a)``, then ``add()``), or step by step with
``add_step(step)``, which validates each step. ``mini_batches`` is the one shuffled iterator for PPO, AMP (the
``previous`` step of the same env and ``previous_valid``), recurrent models (padded ``[L, B]`` sequences) and
distillation (``shuffle=False`` gives the rollout step by step in time order).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from mimic_rl.storage.gather import GatherPlan
from mimic_rl.storage.layout import FLAG, PackedStore
from mimic_rl.storage.sequences import SequenceMode, SequenceTable, build_sequences, pad_indices

__all__ = ["FieldSpec", "RolloutBuffer"]

RESERVED = ("indices", "masks", "loss_mask", "previous", "previous_valid")
"""Keys that ``mini_batches`` adds to every batch; no field may be named so."""


@dataclass(frozen=True)
class FieldSpec:
    """One field of a step: the per-env ``shape`` (or a mapping of group -> shape), its ``dtype`` and input rules.

    ``scalar``: a ``(1,)`` field that also accepts ``[N]`` input. ``lenient``: a bool flag that also accepts 0/1
    numbers (``dones`` of many envs). ``computed``: filled after the rollout (returns, advantages), so ``add_step``
    and ``add`` do not expect it (but accept it).
    """

    shape: Any = ()
    dtype: torch.dtype = torch.float32
    scalar: bool = False
    lenient: bool = False
    computed: bool = False


SpecEntry = tuple[int, ...] | Mapping[str, Any] | TensorDictBase | torch.Tensor | FieldSpec
"""A per-env shape (float32), a mapping of groups, an example ``[N, ...]`` tensor or TensorDict, or a FieldSpec."""


def _field_spec(entry: Any) -> FieldSpec:
    if isinstance(entry, FieldSpec):
        return entry
    if isinstance(entry, torch.Tensor):  # an example [N, ...] tensor carries its dtype
        return FieldSpec(tuple(entry.shape[1:]), entry.dtype)
    return FieldSpec(entry)


class RolloutBuffer:
    """``num_steps`` steps of ``num_envs`` envs for the fields of ``spec``; read and written as a TensorDict.

    ``done_key`` names the bool field (one value per env) that ends episodes: it marks the pairs of
    ``previous_keys`` that cross a reset and cuts ``sequences``. Errors about bad input read ``{error_prefix}
    {labels.get(name, name)}: ...``, or for a group of a TensorDict field ``{error_prefix}{leaf_labels[name][group]}``
    when given.
    """

    def __init__(
        self,
        num_steps: int,
        num_envs: int,
        spec: Mapping[str, SpecEntry] | TensorDictBase,
        device: torch.device | str = "cpu",
        *,
        done_key: str | None = "dones",
        labels: Mapping[str, str] | None = None,
        leaf_labels: Mapping[str, Mapping[Any, str]] | None = None,
        error_prefix: str = "RolloutBuffer: ",
    ) -> None:
        if int(num_steps) < 1 or int(num_envs) < 1:
            raise ValueError(f"num_steps and num_envs must be >= 1, got {num_steps} and {num_envs}")
        names = list(spec.keys())
        if not names:
            raise ValueError("RolloutBuffer: the spec has no fields")
        clash = [n for n in names if n in RESERVED]
        if clash:
            raise ValueError(f"RolloutBuffer: field names {clash} are reserved for mini-batch entries {RESERVED}")
        self.store = PackedStore(int(num_steps), int(num_envs), device)
        specs = {name: _field_spec(spec[name]) for name in names}
        for name, fs in specs.items():
            self.store.add(name, fs.shape, fs.dtype, scalar=fs.scalar, lenient_flag=fs.lenient)
        self.store.allocate()
        self._inputs = tuple(name for name, fs in specs.items() if not fs.computed)
        self._input_set = frozenset(self._inputs)
        self._labels = dict(labels or {})
        self._leaf_labels = dict(leaf_labels or {})
        self._prefix = error_prefix
        # Locked: entries cannot be replaced (that would detach them from the store), only written in place.
        fields = self.store.fields
        self._view = TensorDict({n: f.view for n, f in fields.items()}, batch_size=[self.num_steps, self.num_envs])
        self._view.lock_()
        self.done_key = done_key if done_key in fields else None
        self._done_column = None
        if self.done_key is not None:
            leaf = fields[self.done_key].leaves.get(None)
            if leaf is None or leaf.store != FLAG or leaf.stop - leaf.start != 1:
                raise ValueError(f"RolloutBuffer: done_key {done_key!r} must be a bool field of one value per env")
            self._done_column = leaf.start
            # No previous rollout yet: the carry row is marked done, so step 0 has no valid previous step.
            self.store.stores[FLAG][0, :, leaf.start] = True
        self.step = 0

    # ------------------------------------------------------------------ properties
    @property
    def num_steps(self) -> int:
        """Steps per env in one rollout (T)."""
        return self.store.num_steps

    @property
    def num_envs(self) -> int:
        """Number of envs (N)."""
        return self.store.num_envs

    @property
    def device(self) -> torch.device:
        """Device of every store."""
        return self.store.device

    @property
    def is_full(self) -> bool:
        """Whether the rollout holds all ``num_steps`` steps."""
        return self.step == self.num_steps

    @property
    def transition_view(self) -> TensorDict:
        """The ``[T, N]`` TensorDict of views (``get()``)."""
        return self._view

    # ------------------------------------------------------------------ writing
    def clear(self) -> None:
        """Start a new rollout; the last stored step becomes the carry row (the previous step of step 0)."""
        if self.step > 0:
            self.store.carry(self.step)
        self.step = 0

    def start_rollout(self) -> TensorDict:
        """Start a new rollout (``clear()``) and return the ``[T, N]`` buffer to fill in place, then call ``add()``.

        The TensorDict holds views into the packed stores and is locked: write into it (``buf[t] = step``,
        ``buf["actions"][t].copy_(a)``, ``buf["obs"][:] = x``), never replace its entries.
        """
        self.clear()
        return self._view

    def add(self, rollout: TensorDictBase | Mapping[str, Any] | None = None) -> None:
        """Mark the rollout written in place as complete, or validate and copy in ``rollout`` (``[T, N, ...]``)."""
        if self.step != 0:
            if self.is_full:
                raise OverflowError(self._overflow())
            raise RuntimeError(f"RolloutBuffer.add: {self.step} steps were already added with add_step()")
        if rollout is not None and rollout is not self._view:
            for name in self._check_keys(rollout, "add"):
                self.store.write(
                    name, slice(1, None), rollout[name], self._label(name), self._prefix, self._leaf_labels.get(name)
                )
        self.step = self.num_steps

    def add_step(self, step: TensorDictBase | Mapping[str, Any]) -> None:
        """Validate one step of all envs (``[N, ...]`` per field) and store it at the current step; then advance.

        Raises ``KeyError`` for missing or unknown fields, ``ValueError`` / ``TypeError`` naming the field and the
        expected and given shape or dtype, and ``OverflowError`` when the rollout is full.
        """
        if self.step >= self.num_steps:
            raise OverflowError(self._overflow())
        row, write, labels, prefix = self.step + 1, self.store.write, self._labels, self._prefix
        leaf_labels = self._leaf_labels
        for name in self._check_keys(step, "add_step"):
            write(name, row, step[name], labels.get(name, name), prefix, leaf_labels.get(name))
        self.step += 1

    def _check_keys(self, data: Any, what: str) -> tuple[str, ...]:
        """The fields ``data`` holds, in field order; raises on a missing input field or an unknown key."""
        if type(data) is dict and data.keys() == self._input_set:  # the common case, one C-level comparison
            return self._inputs
        if not isinstance(data, TensorDictBase | Mapping):
            raise TypeError(f"RolloutBuffer.{what}: expected a TensorDict or a mapping, got {type(data).__name__}")
        present = set(data.keys())
        missing = [self._label(n) for n in self._inputs if n not in present]
        unknown = sorted(str(k) for k in present if k not in self.store.fields)
        if missing or unknown:
            raise KeyError(
                f"RolloutBuffer.{what}: missing field(s) {missing}, unknown field(s) {unknown}; "
                f"expected {list(self._inputs)}"
            )
        return tuple(name for name in self.store.fields if name in present)

    def _label(self, name: str) -> str:
        return self._labels.get(name, name)

    def _overflow(self) -> str:
        return (
            f"RolloutBuffer overflow: it holds {self.num_steps} steps per env and all are filled; call "
            "start_rollout() or clear() before the next rollout"
        )

    # ------------------------------------------------------------------ reading
    def get(self, flatten: bool = False) -> TensorDict:
        """The ``[T, N]`` transitions as views (no carry row), or ``[T * N]`` (flat index ``t * N + n``)."""
        return self._view.reshape(-1) if flatten else self._view

    def mini_batches(
        self,
        num_mini_batches: int,
        num_epochs: int = 1,
        keys: Sequence[str] | None = None,
        previous_keys: Sequence[str] | None = None,
        sequences: SequenceTable | SequenceMode | str | None = None,
        max_seq_len: int | None = None,
        shuffle: bool = True,
        as_dict: bool = False,
        reuse: bool = False,
    ) -> Iterator[TensorDict] | Iterator[dict[str, Any]]:
        """Shuffled mini-batches of a full rollout, reshuffled every epoch; every sample once per epoch.

        Flat batches are ``[B]`` TensorDicts of the fields ``keys`` (all by default) plus ``"indices"`` (flat rollout
        indices ``t * N + n``). With ``previous_keys``, ``"previous"`` holds those fields at step t - 1 of the same
        env (the carry row at t = 0) and ``"previous_valid"`` is False where that pair crosses a reset (the previous
        step is done) or precedes the first rollout. With ``sequences`` (a ``SequenceTable``, or a ``SequenceMode``
        cut from the done flags with ``max_seq_len``), batches are ``[L, B]`` padded sequences with ``"masks"``
        (real steps) and ``"loss_mask"``; padded steps are zeroed in the fields (not in ``"previous"``, which
        ``"previous_valid"`` marks invalid there) and ``indices[0]`` is each sequence's first step.

        One ``randperm`` per epoch (``shuffle=False``: the stored order, so ``num_mini_batches=num_steps`` yields the
        rollout step by step, as distillation reads it) and one gather per store per batch, restricted to the float
        columns the fields occupy. ``as_dict=True`` yields the same entries as plain dicts (``"previous"`` too),
        which saves building the TensorDicts (tens of microseconds a batch) in hot loops. ``reuse=True`` (flat
        batches) gathers every batch into the same buffers (``GatherPlan``): a batch's tensors are overwritten by the
        next, so use it only where each batch is done with before the next is asked for.
        """
        if not self.is_full:
            raise RuntimeError(f"mini_batches() needs a full rollout: {self.step} of {self.num_steps} steps stored")
        table = self._sequence_table(sequences, max_seq_len)
        reuse = reuse and table is None  # padded sequences have a new shape every batch
        plan = GatherPlan.build(self.store, self._names(keys, "keys"), reuse=reuse)
        prev_plan = None
        if previous_keys is not None:
            if self._done_column is None:
                raise ValueError("previous_keys needs the done flags: declare a bool field named by done_key")
            names = self._names(previous_keys, "previous_keys")
            prev_plan = GatherPlan.build(self.store, names, flags=True, previous=True, reuse=reuse)
        count = self.num_steps * self.num_envs if table is None else len(table)
        if not 1 <= num_mini_batches <= count:
            unit = "samples" if table is None else "sequences"
            raise ValueError(f"num_mini_batches must be in [1, {count}] (the number of {unit}), got {num_mini_batches}")
        batches = self._iterate(num_mini_batches, num_epochs, count, plan, prev_plan, table, shuffle)
        return batches if as_dict else (TensorDict(b, batch_size=b["indices"].shape) for b in batches)

    def _names(self, keys: Sequence[str] | None, what: str) -> tuple[str, ...]:
        if keys is None:
            return tuple(self.store.fields)
        names = (keys,) if isinstance(keys, str) else tuple(keys)
        unknown = [k for k in names if k not in self.store.fields]
        if unknown:
            fields = list(self.store.fields)
            raise KeyError(f"RolloutBuffer.mini_batches: {what} {unknown} are not fields; fields: {fields}")
        return names

    def _sequence_table(self, sequences: Any, max_seq_len: int | None) -> SequenceTable | None:
        if sequences is None or isinstance(sequences, SequenceTable):
            return sequences
        if self.done_key is None:
            raise ValueError("sequences cut by mode need the done flags: declare a bool field named by done_key")
        return build_sequences(self.store.fields[self.done_key].view, sequences, max_seq_len)

    def _iterate(
        self,
        num_mini_batches: int,
        num_epochs: int,
        count: int,
        plan: GatherPlan,
        prev_plan: GatherPlan | None,
        table: SequenceTable | None,
        shuffle: bool,
    ) -> Iterator[dict[str, Any]]:
        for _ in range(num_epochs):
            order = torch.randperm(count, device=self.device) if shuffle else torch.arange(count, device=self.device)
            for select in torch.tensor_split(order, num_mini_batches):
                if table is None:
                    yield self._batch(select, plan, prev_plan)
                else:
                    index, masks, loss_mask = pad_indices(table, select, self.num_envs)
                    yield self._batch(index, plan, prev_plan, masks, loss_mask)

    def _batch(
        self,
        index: torch.Tensor,
        plan: GatherPlan,
        prev_plan: GatherPlan | None,
        masks: torch.Tensor | None = None,
        loss_mask: torch.Tensor | None = None,
    ) -> dict[str, Any]:
        """The batch at flat rollout indices ``index`` (``[B]`` or padded ``[L, B]``), one gather per store."""
        lead = tuple(index.shape)
        if masks is None:
            _, out = plan.fetch(index)
        else:  # zero the padding so that padded steps are inert
            keep = masks.unsqueeze(-1)
            rows = {key: value & keep if key == FLAG else value * keep for key, value in plan.gather(index).items()}
            out = plan.assemble(rows, lead)
        out["indices"] = index
        if masks is not None:
            out["masks"], out["loss_mask"] = masks, loss_mask
        if prev_plan is not None:
            prev, out["previous"] = prev_plan.fetch(index)  # step t - 1 of the same env
            valid = ~prev[FLAG][..., self._done_column]
            out["previous_valid"] = valid if masks is None else valid & masks
        return out
