"""The names of a recurrent actor's state in every exported graph (``policy.onnx`` and ``policy_baked.onnx``)."""

from __future__ import annotations

from mimic_rl.models.actor_critic import Actor

__all__ = ["recurrent_state_names"]


def recurrent_state_names(actor: Actor) -> tuple[str, ...]:
    """The state inputs of ``actor``'s exported graphs: ``()``, ``("hidden",)`` (GRU) or ``("hidden", "cell")``;
    each has an output ``<name>_out``, the next step's input."""
    if not actor.is_recurrent:
        return ()
    return ("hidden", "cell") if actor.memory.rnn_type == "lstm" else ("hidden",)
