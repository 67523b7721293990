"""Stage 6 — report: drawings, plots and a static HTML report built from the registry alone."""

LAYOUT_CAVEAT = (
    "Logical drawing: positions and distances imply nothing physical — no rack positions, cable lengths or cage types."
)

# Applied only while a drawing is made (rc_context), never at import: deterministic SVG (fixed hash salt, no date),
# text kept as text.
STYLE = {"svg.hashsalt": "fabricref", "svg.fonttype": "none", "font.family": "DejaVu Sans", "font.size": 8}
