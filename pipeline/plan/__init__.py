"""The planner: search the parallel layouts of a training job or a service on a cluster.

enumerate (`space.py`: every legal layout, and why the others are not) → lower bound and memory (`evaluate.py`,
cheap) → prune what cannot win or sit on the Pareto front → evaluate the rest with the step model on the
analytical per-tier costs (one cost per distinct group shape and tier, `cluster.py`) → rank, Pareto front → route
the top K over the installed wiring per physical link (`route.py`). Engines (`engines.py`): in-process, or Ray
tasks on a local instance or an existing cluster, gathering the same rows. Results (`store.py`): Parquet under
the checkout's git-ignored plans/, read by `fabricref query` as the `plans` table; `--save` as a workload.

Floor: beside the stages. It imports the traffic library (estimate/), core/, formats/ and errors only, and writes
nothing under registry/ (no DVC output): a plan is on demand, never part of `dvc repro`.
"""
