"""Stage 4 — topology: references become networkx graphs of their real parts; clusters are built from them."""
