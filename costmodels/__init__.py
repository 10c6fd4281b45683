"""The pure layer: Pydantic specs (model, cluster, training, layout, stack, framework capabilities)
and the cost functions that turn them into memory and step time (memory, activations, compute, comm,
pipeline, timing, step, estimate), each citing its source.

May import: the standard library, pydantic and numpy. Never planner, hardware_profiles, Typer,
Rich, OR-Tools or anything that reads files (tests/test_architecture.py checks it).
"""
