"""Tests of tracker._threads: per-process pools and the cores a process may use."""

from __future__ import annotations

import os

import pytest

from tracker import _threads


def _write(path, text: str) -> str:
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(("text", "expected"), [
    ("200000 100000\n", 2.0),
    ("150000 100000\n", 1.5),
    ("max 100000\n", None),
    ("garbage\n", None),
    ("0 100000\n", None),
])
def test_cgroup_v2_quota(tmp_path, text, expected):
    assert _threads.cgroup_cpu_quota((_write(tmp_path / "cpu.max", text),)) == expected


def test_cgroup_v1_quota_reads_the_period_beside_it(tmp_path):
    quota = _write(tmp_path / "cpu.cfs_quota_us", "300000\n")
    _write(tmp_path / "cpu.cfs_period_us", "100000\n")
    assert _threads.cgroup_cpu_quota((quota,)) == 3.0
    _write(tmp_path / "cpu.cfs_quota_us", "-1\n")
    assert _threads.cgroup_cpu_quota((quota,)) is None


def test_missing_files_mean_no_quota(tmp_path):
    assert _threads.cgroup_cpu_quota((str(tmp_path / "absent"), str(tmp_path / "also_absent"))) is None


def test_available_cores_is_capped_by_the_quota_rounded_up(monkeypatch):
    monkeypatch.setattr(_threads, "cgroup_cpu_quota", lambda: None)
    unlimited = _threads._measure_cores()
    assert unlimited >= 1
    monkeypatch.setattr(_threads, "cgroup_cpu_quota", lambda: 0.5)
    assert _threads._measure_cores() == 1
    monkeypatch.setattr(_threads, "cgroup_cpu_quota", lambda: unlimited + 10.0)
    assert _threads._measure_cores() == unlimited


def test_available_cores_is_measured_once_per_process(monkeypatch):
    monkeypatch.setattr(_threads, "_cores", {})
    calls = []
    monkeypatch.setattr(_threads, "_measure_cores", lambda: calls.append(1) or 3)
    assert _threads.available_cores() == 3 and _threads.available_cores() == 3
    assert len(calls) == 1


def test_thread_pool_is_one_per_name_and_process():
    pool = _threads.thread_pool("test-pool", 2)
    assert _threads.thread_pool("test-pool", 2) is pool
    assert _threads.thread_pool("test-pool-other", 2) is not pool
    assert (("test-pool", os.getpid())) in _threads._pools
