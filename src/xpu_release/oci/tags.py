"""A repository's tag list, page by page: ``Link: <…>; rel="next"`` (ACR and Harbor page tag
lists; the distribution spec's ``n``/``last``), each tag once, read as outside data: a list
that loops, never ends or grows past ``MAX_TAGS`` is refused."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from ..errors import WireError
from ..guard import limits
from ..guard.reading import parse_json, str_list
from ..guard.shown import shown

if TYPE_CHECKING:
    from .transport import Transport


def tag_list(t: Transport, repo: str, page: int) -> list[str]:
    """Every tag of ``repo`` (``RegistryClient.tags``)."""
    out: dict[str, None] = {}  # the tags in the order they came, each once
    url = f"/v2/{repo}/tags/list?n={page}"
    seen: set[str] = set()
    what = f"{t.endpoint.name}: the tags of {repo}"
    while url:
        if url in seen:  # a list that loops: what it holds past here is never known
            msg = f"{what}: page {len(seen)} names a page already read as the next; the list loops"
            raise WireError(msg)
        if len(seen) >= limits.MAX_TAG_PAGES:
            msg = f"{what}: more than {limits.MAX_TAG_PAGES} pages; the limit is {limits.MAX_TAG_PAGES}"
            raise WireError(msg)
        seen.add(url)
        resp = t.request("GET", url, scope=f"repository:{repo}:pull")
        if resp.status_code == 404:
            break
        before = len(out)
        out.update(dict.fromkeys(_tags_of(resp.content, what)))
        if len(out) > limits.MAX_TAGS:
            msg = f"{what}: more than {limits.MAX_TAGS} tags; the limit is {limits.MAX_TAGS}"
            raise WireError(msg)
        url = _next_link(resp.headers.get("Link", ""))
        if url and len(out) == before:
            msg = f"{what}: page {len(seen)} brought no new tag yet names a next page; the list never ends"
            raise WireError(msg)
    return list(out)


def _tags_of(body: bytes, what: str) -> list[str]:
    """The tags one page of a tag list names (at most ``MAX_TAGS``)."""
    data = parse_json(body, what=what, error=WireError)
    tags = str_list(data.get("tags") or []) if isinstance(data, dict) else None
    if tags is None:
        msg = f"{what}: the answer is not a list of tags"
        raise WireError(msg)
    if len(tags) > limits.MAX_TAGS:
        msg = f"{what}: more than {limits.MAX_TAGS} tags; the limit is {limits.MAX_TAGS}"
        raise WireError(msg)
    return [shown(t, 128) for t in tags]  # a tag is shown to people: one of no tag's shape, escaped


# One link of a Link header and the parameters after it, up to the next link. Neither part can
# hold a "<", so each byte is looked at once (a search for "<…>" from every "<" of a header of
# 64 KB of "<" took 12 s).
_LINK = re.compile(r"<([^<>]*)>([^<]*)")
_NEXT = re.compile(r';\s*rel\s*=\s*"?next"?(?:[\s;,]|$)')


def _next_link(header: str) -> str:
    """The target of ``rel="next"`` in a Link header (RFC 8288), as a path of the registry
    (whatever host it names: the page is asked of this endpoint)."""
    for m in _LINK.finditer(header):
        if _NEXT.search(m[2]):
            parsed = urlparse(m[1])
            return f"{parsed.path}?{parsed.query}" if parsed.query else parsed.path
    return ""
