"""A training stage on several nodes: Ray places one launcher on each node of a cluster (a placement group with one
bundle per node, `STRICT_SPREAD`), and the launchers meet in torch's c10d rendezvous, hosted on the first node.

The launchers are the same `torchrun` / `accelerate launch` commands as on one node (`LaunchSection.words`, with
`--nnodes` and the rendezvous), so a stage trains on several nodes exactly as it does on one; Ray only decides
where each launcher runs (as verl and OpenRLHF schedule their workers on Ray). Every node reads and writes the run
folder, so it must be on a filesystem they share. Each node's logs go to `RUN/logs/<stage>/node-<i>/`; a failed
rank on any node fails the stage with its one line (`proctor.pipeline.launch.RankFailure`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from proctor.pipeline.launch import LaunchSection, RankFailure, run_launched


def _address() -> tuple[str, int]:
    """This node's address and a free port on it (the rendezvous' host)."""
    import ray

    from proctor.serving.vllm_server import free_port

    return ray.util.get_node_ip_address(), free_port()


def _launch_node(key: str, words: list[str], args: list[str], log_dir: str, result_file: str
                 ) -> tuple[str, Any]:
    """Run this node's launcher; ("ok", None) or ("failed", the RankFailure). The rendezvous gives global rank 0
    to any node, so the driver reads the result file (on the shared run folder) once every node is done."""
    try:
        return "ok", run_launched(key, words, args, Path(log_dir), Path(result_file), main_here=False)
    except RankFailure as e:
        return "failed", e


def run_on_nodes(launch: LaunchSection, key: str, args: list[str], log_dir: Path, result_file: Path
                 ) -> dict[str, Any]:
    """Run stage `key` (`proctor` arguments `args`) on `launch.nodes` nodes of the Ray cluster at
    `launch.ray_address`, `launch.processes` processes on each; returns the result the main process wrote."""
    try:
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
    except ImportError as e:
        raise ImportError("launch.nodes > 1 places the launchers with Ray: pip install -e \".[ray]\"") from e

    ray.init(address=launch.ray_address, ignore_reinit_error=True, log_to_driver=False)
    nodes = len([n for n in ray.nodes() if n.get("Alive")])
    if nodes < launch.nodes:
        raise ValueError(f"launch.nodes: {launch.nodes} nodes, but the Ray cluster at {launch.ray_address} has {nodes}")
    group = placement_group([{"CPU": 1}] * launch.nodes, strategy="STRICT_SPREAD")
    try:
        ray.get(group.ready(), timeout=120)

        def on(node: int) -> PlacementGroupSchedulingStrategy:
            return PlacementGroupSchedulingStrategy(placement_group=group, placement_group_bundle_index=node)

        host, port = ray.get(ray.remote(num_cpus=1)(_address).options(scheduling_strategy=on(0)).remote())
        launcher = ray.remote(num_cpus=1)(_launch_node)
        result_file.unlink(missing_ok=True)
        done = ray.get([launcher.options(scheduling_strategy=on(i)).remote(
            key, launch.words(node_rank=i, rdzv=f"{host}:{port}"), args, str(log_dir / f"node-{i}"),
            str(result_file)) for i in range(launch.nodes)])
    finally:
        remove_placement_group(group)
    failures = [value for status, value in done if status == "failed"]
    if failures:
        raise failures[0]
    if not result_file.is_file():
        raise RankFailure(key, 0, "exit code 0", "the main process wrote no result (is the run folder on a "
                          "filesystem every node shares?)", log_dir)
    return json.loads(result_file.read_text())
