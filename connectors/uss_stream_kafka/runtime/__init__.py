"""The service's runtime: the application, commits and checkpoints, recovery, dispatch."""
