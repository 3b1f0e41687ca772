"""Steering a published line: ``promote`` from staging to production (the floating tags by the
line rule, ``model/line``, as ``publish``), ``withdraw`` and ``reinstate``. Which image is the
release is the model's answer (``model/pool.served_release``) for all three. ``withdraw`` and
``reinstate`` are the only commands that move a floating tag backwards (``withdraw.Steering``):
each tag to the newest release of the line that is published and not withdrawn at that endpoint,
the release the line rule gives it to (``model/withdrawn.past_withdrawn``: a newer release
withdrawn or never published has left it); tests/unit/release/test_line_rule.py holds the two
together."""
