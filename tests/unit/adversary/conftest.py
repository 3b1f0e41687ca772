"""The release wing's fixtures, for the adversary tests that need them."""

from ..release.conftest import published  # noqa: F401  (a fixture: a published world for watch)
from ..release.test_lifecycle_publish import released  # noqa: F401  (a fixture: publish with a fake engine)
