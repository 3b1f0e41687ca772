"""A runner's disk stays bounded: what a prune removes (least recently used first, leftovers
always, facts never), the lock that keeps it from a running release, and the commands."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from xpu_release.cli import cli
from xpu_release.errors import ConfigError
from xpu_release.release.run.cache import (
    cap_after_run,
    entries,
    exclusive,
    in_use,
    parse_age,
    parse_size,
    prune,
)

NOW = float(int(time.time()))
DAY = 86400.0


def put(path: Path, size: int, age_days: float) -> Path:
    """A cache entry of ``size`` bytes, last used ``age_days`` before NOW."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    os.utime(path, (NOW - age_days * DAY, NOW - age_days * DAY))
    return path


def age(path: Path, days: float) -> None:
    os.utime(path, (NOW - days * DAY, NOW - days * DAY))


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    c = tmp_path / "cache"
    put(c / "oci-blobs" / "sha256-old", 4000, 30)
    put(c / "oci-blobs" / "sha256-mid", 3000, 10)
    put(c / "oci-blobs" / "sha256-new", 2000, 1)
    age(put(c / "blobs" / ("a" * 64) / "wheel.whl", 1000, 20).parent, 20)
    age(put(c / "contexts" / "demo-1.0" / "Dockerfile", 500, 2).parent, 2)
    put(c / "compressed" / "zlib-1.2.13-level-6-members-32M" / "sha256-x", 71, 40)  # a fact
    put(c / "tested" / "abc.json", 100, 40)  # a smoke-test marker: a fact
    put(c / "oci-blobs" / "sha256-y.1234.partial", 700, 0)  # a killed download
    (c / "xpu-push-abc").mkdir()  # a killed push's temporary folder
    put(c / "xpu-push-abc" / "layer.tar", 900, 0)
    return c


def names(paths: list[Path] | tuple[object, ...]) -> set[str]:
    return {getattr(p, "path", p).name for p in paths}  # type: ignore[union-attr]


# --- sizes and ages ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "size"),
    [("20G", 20 << 30), ("500M", 500 << 20), ("1.5g", int(1.5 * (1 << 30))), ("1048576", 1 << 20),
     ("10MiB", 10 << 20), ("0", 0)],
)  # fmt: skip
def test_sizes_are_read_in_binary_units(text: str, size: int) -> None:
    assert parse_size(text, what="--keep-storage") == size


@pytest.mark.parametrize("text", ["", "lots", "-1G", "20X", "1e9"])
def test_a_size_that_is_not_one_is_a_config_error_saying_how_to_write_it(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_size(text, what="XPU_RELEASE_CACHE_MAX")
    assert "XPU_RELEASE_CACHE_MAX" in info.value.message
    assert "20G" in info.value.message


def test_ages_are_read_in_seconds() -> None:
    assert parse_age("7d", what="--older-than") == 7 * DAY
    assert parse_age("12h", what="--older-than") == 12 * 3600
    with pytest.raises(ConfigError):
        parse_age("a week", what="--older-than")


# --- what a prune removes ---------------------------------------------------------------------


def test_prune_to_a_size_removes_the_least_recently_used_and_keeps_the_newest(cache: Path) -> None:
    report = prune(cache, keep_storage=3000, now=NOW)

    assert names(report.removed) == {"sha256-old", "a" * 64, "sha256-mid", "sha256-y.1234.partial",
                                     "xpu-push-abc"}  # fmt: skip
    assert sorted(p.name for p in (cache / "oci-blobs").iterdir()) == ["sha256-new"]
    assert (cache / "contexts" / "demo-1.0" / "Dockerfile").is_file()
    assert report.kept_size == 2500 <= 3000


def test_facts_are_never_pruned(cache: Path) -> None:
    prune(cache, keep_storage=0, now=NOW)

    assert (cache / "tested" / "abc.json").is_file()
    assert (cache / "compressed" / "zlib-1.2.13-level-6-members-32M" / "sha256-x").is_file()
    assert not list((cache / "oci-blobs").iterdir())
    assert not (cache / "blobs").exists() or not list((cache / "blobs").iterdir())


def test_older_than_removes_only_what_no_run_used_for_that_long(cache: Path) -> None:
    report = prune(cache, older_than=15 * DAY, now=NOW)

    assert names(report.removed) == {"sha256-old", "a" * 64, "sha256-y.1234.partial", "xpu-push-abc"}
    assert (cache / "oci-blobs" / "sha256-mid").is_file()


def test_a_dry_run_removes_nothing_and_says_what_would_go(cache: Path) -> None:
    before = sorted(str(p) for p in cache.rglob("*"))

    report = prune(cache, keep_storage=0, dry_run=True, now=NOW)

    assert report.freed == 4000 + 3000 + 2000 + 1000 + 500 + 700 + 900
    assert sorted(str(p) for p in cache.rglob("*")) == before


def test_a_link_in_the_cache_is_removed_not_followed(cache: Path, tmp_path: Path) -> None:
    outside = tmp_path / "precious"
    put(outside / "data", 10, 0)
    (cache / "oci-blobs" / "sha256-link").symlink_to(outside)

    prune(cache, keep_storage=0, now=NOW)

    assert (outside / "data").is_file()
    assert not (cache / "oci-blobs" / "sha256-link").is_symlink()


def test_a_use_makes_an_entry_the_newest(cache: Path) -> None:
    from xpu_release.files import touch

    touch(cache / "oci-blobs" / "sha256-old")  # used now: it outlives the others
    prune(cache, keep_storage=4000, now=time.time() + 1)

    assert sorted(p.name for p in (cache / "oci-blobs").iterdir()) == ["sha256-old"]


def test_the_lock_file_is_not_an_entry(cache: Path) -> None:
    with in_use(cache):
        found = entries(cache).entries
    assert ".in-use.lock" not in names([e.path for e in found])


def test_a_killed_mirrors_spool_and_partial_downloads_are_leftovers_a_prune_removes(cache: Path) -> None:
    """A mirror killed mid-copy leaves its own spool folder (with a partial download in it); an
    earlier version left blobs in the shared ``mirror`` folder; the guarded way out leaves
    temporaries beside facts. A prune with no size or age removes every one, and only them."""
    put(cache / "xpu-mirror-k1ll3d" / "sha256-abc.0f1e.partial", 5000, 0)
    put(cache / "mirror" / "sha256-abc", 6000, 0)
    put(cache / "configs" / ".ab12.json.4242-0badcafe.tmp", 70, 0)
    put(cache / "configs" / "ab12.json", 30, 40)  # a fact beside it
    put(cache / "blobs" / ("a" * 64) / "wheel.whl.77.partial", 80, 0)
    facts_before = entries(cache).facts

    report = prune(cache, now=NOW)

    assert names(report.removed) == {
        "xpu-mirror-k1ll3d", "mirror", ".ab12.json.4242-0badcafe.tmp", "wheel.whl.77.partial",
        "sha256-y.1234.partial", "xpu-push-abc",
    }  # fmt: skip
    assert sorted(p.name for p in (cache / "configs").iterdir()) == ["ab12.json"]
    assert (cache / "blobs" / ("a" * 64) / "wheel.whl").is_file()  # the entry stays; its leftover went
    assert facts_before == 171 + 30  # a temporary is not counted as a fact
    assert report.freed == 5000 + 6000 + 70 + 80 + 700 + 900


# --- the lock ---------------------------------------------------------------------------------


def test_a_prune_that_may_not_wait_removes_nothing_while_a_run_uses_the_cache(cache: Path) -> None:
    with in_use(cache), exclusive(cache, wait=False) as held:
        assert held is False
    with exclusive(cache, wait=False) as held:
        assert held is True


def test_a_run_that_starts_during_a_prune_says_it_waits(cache: Path) -> None:
    import threading

    heard: list[str] = []
    with exclusive(cache, wait=False) as held:
        assert held
        waiter = threading.Thread(target=lambda: in_use(cache, lambda: heard.append("waiting")).__enter__())
        waiter.start()
        waiter.join(timeout=0.5)
        assert waiter.is_alive()  # it waits for the prune
    waiter.join(timeout=5)
    assert not waiter.is_alive()
    assert heard == ["waiting"]


def test_the_cap_after_a_run_waits_for_no_one_and_keeps_its_own_hold(cache: Path) -> None:
    with in_use(cache) as mine, in_use(cache):  # another run is still going
        assert cap_after_run(cache, 0, mine) is None
        assert (cache / "oci-blobs" / "sha256-old").is_file()
        with exclusive(cache, wait=False) as held:
            assert held is False  # this run's shared hold was taken again
    with in_use(cache) as mine:  # alone
        report = cap_after_run(cache, 2000, mine)
    assert report is not None
    assert sorted(p.name for p in (cache / "oci-blobs").iterdir()) == ["sha256-new"]


# --- the commands -----------------------------------------------------------------------------


def invoke(repo: Path, cache: Path, *args: str, **env: str) -> object:
    env = {"XPU_RELEASE_CACHE": str(cache), **env}
    return CliRunner().invoke(cli, ["--root", str(repo), *args], env=env, catch_exceptions=False)


def test_cache_du_counts_each_kind(repo: Path, cache: Path) -> None:
    result = invoke(repo, cache, "cache", "du", "--json")

    data = json.loads(result.stdout)  # type: ignore[attr-defined]
    kinds = {k["kind"]: (k["entries"], k["bytes"]) for k in data["kinds"]}
    assert kinds == {"oci-blobs": (3, 9000), "blobs": (1, 1000), "contexts": (1, 500), "advisories": (0, 0),
                     "leftovers": (2, 1600)}  # fmt: skip
    assert data["facts_bytes"] == 171


def test_cache_prune_keeps_storage_and_reports_as_json(repo: Path, cache: Path) -> None:
    result = invoke(repo, cache, "cache", "prune", "--keep-storage", "3000", "--json")

    assert result.exit_code == 0  # type: ignore[attr-defined]
    data = json.loads(result.stdout)  # type: ignore[attr-defined]
    assert data["freed_bytes"] == 4000 + 3000 + 1000 + 700 + 900
    assert (cache / "oci-blobs" / "sha256-new").is_file()


def test_a_size_that_is_not_one_is_exit_3_and_nothing_is_removed(repo: Path, cache: Path) -> None:
    result = invoke(repo, cache, "cache", "prune", "--keep-storage", "lots")

    assert result.exit_code == 3  # type: ignore[attr-defined]
    assert "write it like 20G" in result.stderr  # type: ignore[attr-defined]
    assert (cache / "oci-blobs" / "sha256-old").is_file()


def test_a_bad_cache_cap_stops_a_publish_before_anything_is_sent(repo: Path, cache: Path) -> None:
    result = invoke(repo, cache, "publish", "training-cpu-pytorch:25.03", XPU_RELEASE_CACHE_MAX="big")

    assert result.exit_code == 3  # type: ignore[attr-defined]
    assert "XPU_RELEASE_CACHE_MAX" in result.stderr  # type: ignore[attr-defined]


# --- the engine -------------------------------------------------------------------------------


PUSHED_TAG = "127.0.0.1:15001/x/training-cpu-pytorch:24.12"


class FakeApi:
    def __init__(self, images: list[dict[str, object]], in_use: set[str]) -> None:
        self._images = images
        self.in_use = in_use
        self.removed: list[str] = []

    def images(self, filters: dict[str, str]) -> list[dict[str, object]]:
        assert filters == {"label": "io.xpu-release.inputs.sha256"}  # only what we labelled
        return [dict(i) for i in self._images]

    def remove_image(self, ref: str) -> None:
        from docker.errors import APIError

        image = next(i for i in self._images if ref == i["Id"] or ref in i["RepoTags"])  # type: ignore[operator]
        if image["Id"] in self.in_use:
            msg = "conflict"
            raise APIError(msg, explanation=f"image is being used by running container {ref[:5]}")
        self.removed.append(ref)
        if ref == image["Id"]:
            self._images.remove(image)
        else:
            image["RepoTags"] = [t for t in image["RepoTags"] if t != ref]  # type: ignore[attr-defined]


class FakeEngine:
    def __init__(self, api: FakeApi) -> None:
        self.api = api

    def image(self, ref: str) -> object | None:
        from types import SimpleNamespace

        for i in self.api._images:
            if ref == i["Id"] or ref in i["RepoTags"]:  # type: ignore[operator]
                return SimpleNamespace(id=i["Id"])
        return None


def test_the_engine_prune_keeps_every_release_the_repository_or_a_record_names(repo: Path) -> None:
    from xpu_release.manifest import Repo
    from xpu_release.release.run.cache import prune_engine

    old = "sha256:" + "1" * 64  # an earlier build of 25.03, superseded, untagged
    gone = "sha256:" + "2" * 64  # a version whose manifest was removed
    current = "sha256:" + "3" * 64
    busy = "sha256:" + "4" * 64
    api = FakeApi([
        {"Id": old, "RepoTags": ["<none>:<none>"]},
        {"Id": gone, "RepoTags": ["training-cpu-pytorch:24.12", PUSHED_TAG]},
        {"Id": current, "RepoTags": ["training-cpu-pytorch:25.03"]},
        {"Id": busy, "RepoTags": []},
    ], in_use={busy})  # fmt: skip

    report = prune_engine(FakeEngine(api), Repo.discover(str(repo)))  # type: ignore[arg-type]

    assert report.removed == (old, gone)
    assert current in report.kept
    assert [i for i, _ in report.refused] == [busy]
    assert "running container" in report.refused[0][1]
    assert api.removed == [old, "training-cpu-pytorch:24.12", PUSHED_TAG, gone]
