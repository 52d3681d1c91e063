"""The sweep on a Ray cluster (a one-node cluster on this machine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mallocgame.bench.sweep import Job, load_records, run_sweep
from mallocgame.errors import SolverError, WorkerError
from mallocgame.workers import start_local_ray

ray = pytest.importorskip("ray")


def test_sweep_runs_on_ray(tmp_path: Path) -> None:
    start_local_ray(1)
    try:
        address = ray.get_runtime_context().gcs_address
        jobs = [Job("xla-v1/lstm_infer", "random", seed, None, 2) for seed in (0, 1)]
        assert run_sweep(jobs, tmp_path, ray_address=address) == (2, 0)
        assert run_sweep(jobs, tmp_path, ray_address=address) == (0, 2)
        local = tmp_path / "local"
        run_sweep(jobs, local, workers=1)
        by_seed = {r["seed"]: r["reward_s"] for r in load_records(local)}
        assert {r["seed"]: r["reward_s"] for r in load_records(tmp_path)} == by_seed
        # a job's own error, as one line and its own type: not the Ray worker's traceback
        too_large = [Job("xla-v1/lstm_infer", "exhaustive", 0, None, 10)]
        with pytest.raises(SolverError) as raised:
            run_sweep(too_large, tmp_path / "failed", ray_address=address)
        assert "too large" in str(raised.value) and "\n" not in str(raised.value)
    finally:
        ray.shutdown()


@pytest.mark.parametrize(
    "address, needle",
    [("nowhere", "give local, auto or HOST:PORT"), ("127.0.0.1:1", "no Ray cluster answers")],
)
def test_a_sweep_on_an_address_without_a_cluster_is_one_line_at_once(
    tmp_path: Path, address: str, needle: str
) -> None:
    jobs = [Job("xla-v1/lstm_infer", "random", 0, None, 2)]
    said: list[str] = []
    with pytest.raises(WorkerError, match=needle):
        run_sweep(jobs, tmp_path / "out", ray_address=address, progress=said.append)
    assert not (tmp_path / "out").exists() and said == []  # before the folder and the jobs line


def test_a_sweep_on_a_local_cluster_started_for_it(tmp_path: Path) -> None:
    """``--ray local`` was refused by a message that offered it ("give local, auto or
    HOST:PORT"); it starts a one-node cluster here, as muzero's ``--ray local`` does,
    and shuts it down after the jobs."""
    jobs = [Job("xla-v1/lstm_infer", "random", seed, None, 2) for seed in (0, 1)]
    assert run_sweep(jobs, tmp_path, workers=1, ray_address="local") == (2, 0)
    assert not ray.is_initialized()
    run_sweep(jobs, tmp_path / "one", workers=1)
    by_seed = {r["seed"]: r["reward_s"] for r in load_records(tmp_path / "one")}
    assert {r["seed"]: r["reward_s"] for r in load_records(tmp_path)} == by_seed
    assert run_sweep(jobs, tmp_path, ray_address="local") == (0, 2)  # nothing started


def test_a_sweep_on_ray_local_starts_its_cluster_even_where_ray_address_names_one(
    tmp_path: Path, monkeypatch
) -> None:
    """``local`` is a cluster started for the sweep: Ray is told so, for without an
    address it joins the cluster ``RAY_ADDRESS`` names and refuses the CPU count there.
    (``ray.init`` is a stand-in that fails: no cluster starts.)"""
    calls: list[dict] = []

    def init(**kwargs) -> None:
        calls.append(kwargs)
        raise RuntimeError("no cluster in this test")

    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    jobs = [Job("xla-v1/lstm_infer", "random", 0, None, 2)]
    with pytest.raises(WorkerError, match="no cluster in this test"):
        run_sweep(jobs, tmp_path, workers=1, ray_address="local")
    assert [call.get("address") for call in calls] == ["local"]
    assert calls[0]["num_cpus"] == 1
