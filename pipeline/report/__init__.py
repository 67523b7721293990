"""Stage 6 — report: drawings, plots and a static HTML report built from the registry alone."""

LAYOUT_CAVEAT = (
    "Logical drawing: positions and distances imply nothing physical — no rack positions, cable lengths or cage types."
)
