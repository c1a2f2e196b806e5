"""Analysis stage: what one inference costs on the NPU.

``profile.py`` reads the cycle / energy / traffic profile of a run; ``estimate.py`` gives the
same profile without running; ``sweep.py`` estimates a model over a grid of NPU configurations
(``portable.py`` ships the model to sweep workers); ``summary.py`` turns a profile into the
network summary and per-layer tables the CLI prints.
"""

from .estimate import estimate
from .profile import Profile, profile
from .sweep import SweepResult, config_grid, sweep

__all__ = ["Profile", "SweepResult", "config_grid", "estimate", "profile", "sweep"]
