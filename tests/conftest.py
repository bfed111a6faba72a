"""Shared test setup: headless MuJoCo rendering."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")
