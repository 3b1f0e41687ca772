"""The engine's volumes as the evaluation's served arms ask them (``client.volumes.create``, then
the volume's ``remove``): each made and each removed is recorded, so a test can say that the
arms of one image share one volume and that none is left."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class FakeVolume:
    name: str
    volumes: FakeVolumes

    def remove(self, force: bool = False) -> None:
        assert force
        self.volumes.removed.append(self.name)


@dataclass
class FakeVolumes:
    made: dict[str, dict[str, Any]] = field(default_factory=dict)  # name → what it was made with
    removed: list[str] = field(default_factory=list)

    def create(self, name: str, **kwargs: Any) -> FakeVolume:
        self.made[name] = kwargs
        return FakeVolume(name, self)
