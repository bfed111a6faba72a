"""Exact tabular tools (numpy/scipy only): MDPs, policy optimization, off-policy operators."""
