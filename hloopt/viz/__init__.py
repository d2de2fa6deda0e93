"""Pictures of what hloopt computes: the module as a graph with overlays (Model Explorer), and HTML reports.

Kept apart from `cli/` so the graph and report builders are tested without click, and apart from `xla/` so
they draw what the runs returned without running anything themselves.
"""
