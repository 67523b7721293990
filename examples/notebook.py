"""fabricref from a notebook or script, with the public API only: registry query → topology → estimate → audit.

Run it from a checkout whose registry is built (`dvc repro` or `dvc pull`), or set FABRICREF_ROOT to one.
"""

import fabricref

# 1. The registry: a read-only DuckDB connection (`con.sql(query).df()` gives pandas, `.pl()` polars, if installed).
with fabricref.registry() as con:
    rows = con.execute(
        "SELECT reference_id, value_number, unit, direction, status FROM fields "
        "WHERE field = 'scale_up.bandwidth_per_accelerator' ORDER BY reference_id"
    ).fetchall()
for reference_id, value, unit, direction, status in rows:
    print(f"{reference_id}: {'?' if value is None else f'{value:.4g}'} {unit} {direction} ({status})")

# 2. A topology as a networkx graph: edge bandwidth_gbps is per direction, in Gb/s.
g = fabricref.graph("nvidia-gb200-nvl72")
print(g.graph["topology_id"], g.number_of_nodes(), "nodes", g.number_of_edges(), "edges")

# 3. A workload laid onto that topology: one record per communication phase, seconds in seconds.
phases = fabricref.estimate_workload(g, "llama70b-serve-disaggregated")
for p in phases:
    print(f"{p['phase']}: {p['total_seconds']:.3g} s ({p['dominant']}, {p['confidence']})")

# 4. Where a figure came from: the provenance tree, each snapshot re-hashed.
tree = fabricref.audit("nvidia-gb200-nvl72", "scale_up.bandwidth_per_accelerator")
print(tree["value"], tree["unit"], tree["status"], [c["verified"] for c in tree["provenance"]])
