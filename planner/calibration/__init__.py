"""`parplan calibrate`: training logs (planner.files.logs) turned into runs the time model can price
(`runs`), the stack's free parameters fitted to them (`fit`, with the shared simplex fitter of
`fitter`, which benchmarks/calibrate.py uses too) and the result shown and written (`command`).

May import: everything below the CLI (costmodels, hardware_profiles, planner.errors,
planner.safetext, planner.files, planner.search, planner.report); never benchmarks/.
"""
