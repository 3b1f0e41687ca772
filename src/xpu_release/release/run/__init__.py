"""Running a release: the pipeline and its stages (preflight, build, smoke, evaluate, notes),
the context they share, and the runner's cache."""
