"""Putting a tested image at every endpoint and proving it: the first push, the copies to the
regions, the tag rules, the documents attached, ``verify`` and ``mirror``."""
