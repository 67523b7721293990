"""What the explorer and the static report both show: how a topology is drawn (`drawing`, `layout`), a workload's
load per drawn link (`loads`), the templates and filters both render with (`render`). A floor below the stages and
the explorer, which import it; it imports neither.
"""
