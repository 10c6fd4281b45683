"""parplan's calibration and validation scripts. Each runs as a file (`python benchmarks/accuracy.py`);
`python -m benchmarks.refit` runs them all in order (benchmarks/refit.py)."""
