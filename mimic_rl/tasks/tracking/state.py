"""The body-state container the tracking MDP core consumes (defined with the motions, upstream of the tasks)."""

from mimic_rl.motion.state import BodyState

__all__ = ["BodyState"]
