"""Steering a published line: ``promote`` from staging to production, ``withdraw`` and
``reinstate``, each asking the model for the digest and the floating tags."""
