"""The figure scripts: one per figure, each run as `python paper_figures/<name>.py`; a script
that reuses another's functions imports it as `paper_figures.<name>` (nothing outside
paper_figures imports them)."""
