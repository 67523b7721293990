"""Stage 1 — retrieve: pin vendor documents by SHA-256 and check the pins (`fetch` talks HTTP; `stage` decides
what becomes a revision)."""
