"""The package's expected errors: bad input a user can fix. The command line prints them as one line, exit code 2.

Every message reads ``<file, key or flag>: <what was expected, what was found>; <how to fix>``. Anything that is not a
``MimicRLError`` (or one of the ``OSError``\\ s of a path the user gave) is a bug and keeps its traceback.

The classes also derive from the built-in exception a caller would catch without this module (``ValueError``,
``FileNotFoundError``, ...), so library code that predates them keeps working.
"""

from __future__ import annotations

__all__ = [
    "CheckpointError",
    "ConfigError",
    "DeviceError",
    "MimicRLError",
    "MotionFormatError",
    "RenderingUnavailable",
    "Terminated",
    "TrainingDiverged",
    "UsageError",
]


class MimicRLError(Exception):
    """Base of the errors a user can fix; the CLI shows ``error: <message>`` and exits with code 2."""


class ConfigError(MimicRLError, ValueError):
    """A config value or key is wrong; the message gives its dotted path (``env.num_envs``)."""


class MotionFormatError(MimicRLError, ValueError):
    """A motion file is malformed; the message names the file, the field, what was expected and what was found."""


class CheckpointError(MimicRLError, ValueError):
    """A checkpoint is missing, unreadable, unsafe, of another kind, or trained for another robot / observation
    layout; the message names the file and what differs."""


class UsageError(MimicRLError, ValueError):
    """A command-line option or file argument is invalid; the message names the flag."""


class DeviceError(UsageError):
    """A device string is invalid or the device is not available; the message lists what is."""


class TrainingDiverged(MimicRLError, FloatingPointError):
    """Training produced non-finite values it cannot skip (NaN actions, losses or statistics)."""


class RenderingUnavailable(MimicRLError, RuntimeError):
    """No OpenGL backend (or no video writer) for offscreen rendering."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's preemption, ``kill``, ``timeout``) while a command runs: handled like Ctrl-C, so a
    run saves the models of its last finished iteration before it exits (code 143)."""
