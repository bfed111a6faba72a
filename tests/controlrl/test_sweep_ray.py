"""The sweep on a real Ray cluster of several nodes on this machine, bound to loopback only:
runs spread over the nodes, a node killed mid-run, the driver killed and rerun, bad addresses.

The nodes are started in-process with ray.cluster_utils.Cluster; the sweep's driver is a
separate process (`python -m controlrl.sweep --backend ray --address ...`), as a user runs it.
Before any workload runs, every listening socket of the cluster's processes is checked to be
on a loopback address.
"""

import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from timeouts import scaled

from controlrl import experiment

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

# a fake algorithm: one row per step, a checkpoint after each, --resume continues from it
# (rows after the checkpoint dropped), so a run killed anywhere finishes with each step once
SLOW_SCRIPT = """
import argparse, json, os, time
from pathlib import Path
p = argparse.ArgumentParser()
for f in ("--env-id", "--seed", "--total-timesteps", "--run-dir", "--resume"):
    p.add_argument(f)
p.add_argument("--no-progress", action="store_true")
p.add_argument("--step-seconds", type=float, default=0.3)
a = p.parse_args()
run = Path(a.resume or a.run_dir)
ckpt = run / "checkpoints" / "latest.pt"
if a.resume:
    cfg = json.loads((run / "config.json").read_text())
    start = int(ckpt.read_text())
    rows = (run / "metrics.csv").read_text().splitlines()
    keep = [r for r in rows[1:] if int(r.split(",")[0]) <= start]
    (run / "metrics.csv").write_text("\\n".join([rows[0], *keep]) + "\\n")
else:
    ckpt.parent.mkdir(parents=True)
    cfg = {"total": int(a.total_timesteps), "step_seconds": a.step_seconds}
    (run / "config.json").write_text(json.dumps(cfg))
    (run / "metrics.csv").write_text("step,pid\\n")
    start = 0
for step in range(start + 1, cfg["total"] + 1):
    time.sleep(cfg["step_seconds"])
    with (run / "metrics.csv").open("a") as f:
        f.write(f"{step},{os.getpid()}\\n")
    tmp = ckpt.with_suffix(".tmp")
    tmp.write_text(str(step))
    os.replace(tmp, ckpt)
(run / "final_eval.json").write_text("{}")
"""

LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def _is_loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip.split("%")[0])
    if addr.version == 6 and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.is_loopback


def listeners(pids: list[int]) -> list[tuple[int, str, str, int]]:
    """(pid, name, ip, port) of every listening TCP socket of these processes and their
    descendants."""
    import psutil

    procs = {}
    for pid in pids:
        try:
            root = psutil.Process(pid)
            for p in [root, *root.children(recursive=True)]:
                procs[p.pid] = p
        except psutil.NoSuchProcess:
            continue
    found = []
    for p in procs.values():
        try:
            for conn in p.net_connections(kind="tcp"):
                if conn.status == psutil.CONN_LISTEN:
                    found.append((p.pid, p.name(), conn.laddr.ip, conn.laddr.port))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def assert_loopback_only(pids: list[int]) -> None:
    found = listeners(pids)
    assert found, "no listening socket found: the check would see nothing"
    bad = [f for f in found if not _is_loopback(f[2])]
    assert not bad, f"Ray listens beyond loopback: {bad}"


@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("psutil")
    with pytest.MonkeyPatch.context() as mp:
        for k, v in LOOPBACK_ENV.items():  # read by Ray at import and by every node it starts
            mp.setenv(k, v)
        pytest.importorskip("ray")
        from ray._private import ray_constants
        from ray.cluster_utils import Cluster

        mp.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)  # if ray was imported before

        c = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "node_ip_address": "127.0.0.1",
                "include_dashboard": False,
            },
        )
        try:
            c.add_node(num_cpus=1, node_ip_address="127.0.0.1")
            c.wait_for_nodes()
            assert c.address.startswith("127.0.0.1:")
            assert_loopback_only([os.getpid()])  # before anything runs on it
            gcs_port = int(c.address.rsplit(":", 1)[1])
            assert gcs_port in {f[3] for f in listeners([os.getpid()])}
            yield c
        finally:
            c.shutdown()


@pytest.fixture
def slow_algos(tmp_path):
    algos = tmp_path / "algos"
    algos.mkdir()
    (algos / "slow.py").write_text(SLOW_SCRIPT)
    return algos


def driver_cmd(address, out, algos, seeds, steps, *flags, step_seconds=0.3):
    return [
        sys.executable,
        "-m",
        "controlrl.sweep",
        "--algos",
        "slow",
        "--envs",
        "CartPole-v1",
        "--seeds",
        str(seeds),
        "--total-timesteps",
        str(steps),
        "--backend",
        "ray",
        "--address",
        address,
        "--out",
        str(out),
        "--algos-dir",
        str(algos),
        *flags,
        "--",
        "--step-seconds",
        str(step_seconds),
    ]


def driver_env():
    return {**os.environ, **LOOPBACK_ENV, "PYTHONPATH": str(ROOT)}


def states(out: Path) -> dict[str, dict]:
    found = {}
    for path in (out / "state").rglob("*.json"):
        state = experiment.read_run_state(path)
        if state:
            found[path.stem] = state
    return found


def steps_of(out: Path, seed: int) -> list[int]:
    metrics = out / "runs" / "slow" / "CartPole-v1" / f"seed{seed}" / "metrics.csv"
    if not metrics.exists():
        return []
    return [int(r.split(",")[0]) for r in metrics.read_text().splitlines()[1:]]


def wait_for(predicate, timeout, what):
    deadline = time.time() + scaled(timeout)
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def node_ids(c) -> set[str]:
    return {n.node_id for n in c.list_all_nodes()}


def test_runs_land_on_both_nodes_and_status_shows_what_runs(cluster, tmp_path, slow_algos):
    out = tmp_path / "sweep"
    cmd = driver_cmd(cluster.address, out, slow_algos, 4, 6)
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=driver_env(), stdout=subprocess.PIPE, text=True)
    seen_running = []
    try:
        while proc.poll() is None:
            if (out / "sweep.json").exists():
                seen_running.append(experiment.summarize(out)["counts"]["running"])
            assert_loopback_only([os.getpid(), proc.pid])  # the driver's own listeners too
            time.sleep(0.2)
    finally:
        stdout = proc.communicate(timeout=scaled(120))[0]
    assert proc.returncode == 0, stdout
    assert max(seen_running) == 2, seen_running  # two nodes of one CPU: never more than two
    data = json.loads((out / "sweep.json").read_text())
    assert {v["status"] for v in data["runs"].values()} == {"done"}
    assert data["driver"]["state"] == "finished"
    assert {s["node"] for s in states(out).values()} == node_ids(cluster)
    for seed in range(1, 5):
        assert steps_of(out, seed) == list(range(1, 7))


def test_killed_node_has_its_run_retried_and_finished(cluster, tmp_path, slow_algos):
    extra = cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    cluster.wait_for_nodes()
    assert_loopback_only([os.getpid()])
    out = tmp_path / "sweep"
    cmd = driver_cmd(cluster.address, out, slow_algos, 3, 30, step_seconds=0.2)
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=driver_env(), stdout=subprocess.PIPE, text=True)
    try:

        def on_extra():
            for seed, s in states(out).items():
                if s["node"] == extra.node_id and s["status"] == "running":
                    if steps_of(out, int(seed.removeprefix("seed"))):
                        return seed
            return None

        seed = wait_for(on_extra, 120, "a run on the extra node")
        cluster.remove_node(extra, allow_graceful=False)
        stdout = proc.communicate(timeout=scaled(240))[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stdout
    data = json.loads((out / "sweep.json").read_text())
    assert {v["status"] for v in data["runs"].values()} == {"done"}, data["runs"]
    lost = states(out)[seed]
    assert lost["attempt"] == 2 and lost["node"] != extra.node_id, lost
    assert lost["start_step"] > 0  # resumed from its checkpoint, not started again
    for s in (1, 2, 3):
        assert steps_of(out, s) == list(range(1, 31)), s


def test_killed_driver_is_reported_interrupted_and_rerun_resumes(cluster, tmp_path, slow_algos):
    out = tmp_path / "sweep"
    cmd = driver_cmd(cluster.address, out, slow_algos, 2, 60, step_seconds=0.2)
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=driver_env(), stdout=subprocess.DEVNULL)
    wait_for(
        lambda: (
            len([s for s in states(out).values() if s["status"] == "running"]) == 2
            and min(len(steps_of(out, s)) for s in (1, 2)) >= 3
        ),
        120,
        "both runs under way",
    )
    running = experiment.summarize(out)
    assert running["state"] == "running" and running["counts"]["running"] == 2
    # the driver copies what the runs say into sweep.json as it polls (every few seconds)
    wait_for(
        lambda: (
            {v["status"] for v in json.loads((out / "sweep.json").read_text())["runs"].values()}
            == {"running"}
        ),
        20,
        "sweep.json to say running",
    )
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    pids = [s["pid"] for s in states(out).values()]
    import psutil

    # Ray ends a dead driver's tasks; the runs die with their task (PDEATHSIG)
    wait_for(lambda: not any(psutil.pid_exists(p) for p in pids), 60, "the runs to end")
    status = subprocess.run(
        [sys.executable, "-m", "controlrl.sweep", "status", str(out)],
        env=driver_env(),
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert status.returncode == 0, status.stderr
    assert "0 running" in status.stdout and "sweep interrupted" in status.stdout, status.stdout
    data = json.loads((out / "sweep.json").read_text())
    assert data["driver"]["state"] == "interrupted"
    assert {v["status"] for v in data["runs"].values()} == {"queued"}
    rerun = subprocess.run(
        cmd, cwd=tmp_path, env=driver_env(), capture_output=True, timeout=scaled(240)
    )
    assert rerun.returncode == 0, rerun.stderr
    for s in (1, 2):
        assert steps_of(out, s) == list(range(1, 61)), s
    assert all(st["attempt"] == 2 and st["start_step"] > 0 for st in states(out).values())


def test_workers_and_cpus_per_run_reach_ray(cluster, tmp_path, slow_algos):
    out = tmp_path / "one"
    cmd = driver_cmd(cluster.address, out, slow_algos, 3, 4, "--workers", "1")
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=driver_env(), stdout=subprocess.PIPE, text=True)
    most = 0
    while proc.poll() is None:
        most = max(most, sum(s["status"] == "running" for s in states(out).values()))
        time.sleep(0.05)
    assert proc.returncode == 0 and most == 1, (proc.stdout.read(), most)
    # half a CPU per run: two runs at once on each one-CPU node
    half = tmp_path / "half"
    cmd = driver_cmd(cluster.address, half, slow_algos, 4, 12, "--cpus-per-run", "0.5")
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=driver_env(), stdout=subprocess.PIPE, text=True)
    most = 0
    while proc.poll() is None:
        most = max(most, sum(s["status"] == "running" for s in states(half).values()))
        time.sleep(0.05)
    assert proc.returncode == 0 and most > 2, (proc.stdout.read(), most)
    # no node has 2 CPUs: refused in one line before anything is written
    big = tmp_path / "big"
    cmd = driver_cmd(cluster.address, big, slow_algos, 1, 4, "--cpus-per-run", "2")
    res = subprocess.run(cmd, cwd=tmp_path, env=driver_env(), capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "error: no node of the Ray cluster has 2 CPU free for one run "
        "(--cpus-per-run, --gpus-per-run)"
    ]
    assert not big.exists()


def test_wrong_address_fails_in_one_line(tmp_path, slow_algos):
    # a port that answers TCP but never speaks Ray: the connection attempt is timed out
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted = []
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    port = server.getsockname()[1]
    try:
        for address, extra in ((f"127.0.0.1:{port}", ["--connect-timeout", "5"]), ("x", [])):
            start = time.time()
            cmd = driver_cmd(address, tmp_path / "out", slow_algos, 1, 4, *extra)
            res = subprocess.run(
                cmd,
                cwd=tmp_path,
                env=driver_env(),
                capture_output=True,
                text=True,
                timeout=scaled(60),
            )
            lines = res.stderr.strip().splitlines()
            assert res.returncode == 2 and len(lines) == 1, res.stderr
            assert lines[0].startswith(f"error: --address {address}") or "HOST:PORT" in lines[0]
            assert time.time() - start < 40
            assert not (tmp_path / "out").exists()
    finally:
        server.close()
