"""``str.isdigit`` is true of digits ``int`` does not read (``²``, ``¹³``): ``parse_codec`` checks a
level with ``level_text.isdigit() and int(level_text)``, so ``--compression zlib:²`` or
``XPU_RELEASE_COMPRESSION=isal:²`` ends in exit 70 (ValueError) where a wrong level is exit 3.
(The same test guards ``bodies.declared_length`` and ``history._order``: see their files.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from ..cli.hostile import REF, a_users_error, invoke


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["publish", REF, "--compression", "zlib:²"], {}),
        (["release", REF, "--dry-run"], {"XPU_RELEASE_COMPRESSION": "isal:²"}),
    ],
    ids=["--compression", "XPU_RELEASE_COMPRESSION"],
)
def test_a_codec_level_of_a_superscript_digit_is_a_configuration_error(
    repo: Path, tmp_path: Path, argv: list[str], env: dict[str, str]
) -> None:
    result = invoke(repo, argv, env={"XPU_RELEASE_CACHE": str(tmp_path / "cache"), **env})

    a_users_error(result, 3)  # today: exit 70, ValueError: invalid literal for int() with base 10: '²'
