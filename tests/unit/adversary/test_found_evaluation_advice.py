"""Found by review (issue 41): an undecided comparison says how many rounds would decide it
(up to 1000, ``bootstrap.MAX_ROUNDS_SAID``), and docs/using/evaluation.md says "Raise `rounds`
where the machine is noisier"; but the manifest takes ``rounds`` from 3 to 50 only. A user told
"about 125 rounds would decide it" who writes ``rounds: 125`` is refused by ``validate``. The
advice must be one the user can follow: a number of rounds the manifest takes, or say that the
manifest's most (50) would not decide it."""

from __future__ import annotations

import re

from xpu_release.image.bootstrap import Verdict, judge
from xpu_release.image.evaluation import Comparison
from xpu_release.manifest.evaluation import EVALUATION

MOST_ROUNDS = EVALUATION.inner.fields["rounds"].maximum


def test_an_undecided_comparison_advises_no_more_rounds_than_the_manifest_takes() -> None:
    # 0.905x with an interval of [0.88, 0.93] against a 10 % threshold, in 5 rounds.
    j = judge([905.0, 900.0, 910.0, 880.0, 930.0], [1000.0] * 5, better="higher", threshold=0.1)
    assert j.verdict == Verdict.UNDECIDED
    said = Comparison(variant="plain", against="base", against_ref="b:1", judgement=j).said(
        "tokens_per_second", 10
    )
    advised = [int(n) for n in re.findall(r"about (\d+) rounds", said)]
    assert all(n <= MOST_ROUNDS for n in advised) or f"{MOST_ROUNDS}" in said, said
