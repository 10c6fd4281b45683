"""What a person reads: the estimate and plan tables on the terminal (`render`), the preset listings
(`listing`), and the report of a plan file: its data (`data`), terminal (`terminal`) and
self-contained HTML (`html`) views.

May import: costmodels, hardware_profiles, planner.errors, planner.safetext, planner.files,
planner.search (layout text, explanations). Never planner.exporters or the CLI.
"""
