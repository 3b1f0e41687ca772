"""``evaluate``: the end-to-end performance evaluation of a built image, alone (a release runs it
as its stage between ``test`` and ``scan``)."""

from __future__ import annotations

import click

from .app import State, _emit_json, cli, json_option, pass_state, ref_argument
from .groups import Login
from .live import line_sink


@cli.command()
@ref_argument()
@click.option(
    "--against",
    metavar="NAME:VERSION",
    help="Compare with this image in the engine instead of the manifest's (its base, the release it "
    "extends).",
)
@json_option("The evaluation as JSON on stdout: every round's figures and every comparison.")
@pass_state
def evaluate(state: State, ref: str, against: str | None, as_json: bool) -> None:
    """Run the manifest's evaluation on the built NAME:VERSION: its workload and each variant, in
    throwaway containers under the same CPU set and memory, interleaved with the images it is
    compared with, round after round until each comparison is decided; each is the median of the
    rounds' ratios with a bootstrap interval. Exit 17 when a regression beyond the threshold (over
    its whole interval) is not accepted by the manifest, or a comparison is undecided and the
    manifest says `undecided: fail`; exit 18 when the workload fails or the budget runs out. The
    record is written by `release`, not here.

    \b
    Examples:
      xpu-release evaluate training-cpu-pytorch:25.03
      xpu-release evaluate training-cpu-pytorch:25.04 --against training-cpu-pytorch:25.03 --json
    """
    from ..errors import ConfigError, PerformanceRegression
    from ..image.engine import Engine
    from ..image.evaluation import NOT_COMPARED
    from ..image.lock import load_lock
    from ..manifest import parse_ref
    from ..release.run.evaluate import against_image, evaluate_image, gate_failure, references

    spec = state.repo.load_ref(ref)
    if against is not None:
        parse_ref(against)  # NAME:VERSION, as everywhere: its own clear error
    ev = spec.evaluation
    if ev is None:
        msg = f"{spec.manifest_path}: declares no evaluation; add an `evaluation:` section to evaluate it"
        raise ConfigError(msg)
    lock = load_lock(state.root, spec)
    registries = state.registries()
    creds = Login().store(state.settings, registries)
    engine = Engine.connect()
    image_id = engine.require_image(spec.platforms[0].local_ref(spec.ref)).id  # the first platform's
    live = line_sink()
    refs = (
        (against_image(spec, engine, image_id, against),)
        if against
        else references(state.repo, spec, registries, lock, engine, creds, image_id)
    )
    evaluated = evaluate_image(spec, engine, image_id, refs, on_line=live)
    live.close()
    if evaluated is None:
        missing = "; ".join(f"{r.ref}: {r.missing}" for r in refs) or f"{spec.version} extends no release"
        message = f"{spec.ref}: nothing to compare with ({missing}) and no variant declared"
        if as_json:
            _emit_json({"status": "skipped", "reason": message})
        else:
            click.echo(message)
        return
    if as_json:
        _emit_json(evaluated.entry)
    else:
        e = evaluated.entry
        click.echo(f"{spec.ref}: {ev.metric} ({ev.better} is better), threshold {ev.threshold_percent} %, "
                   f"{e['rounds']} rounds, CPU set {e['cpuset']}, {e['memory_mb']} MB")  # fmt: skip
        for c in evaluated.comparisons:
            click.echo(f"  {c.said(ev.metric, ev.threshold_percent)}")
        if e["status"] == NOT_COMPARED:
            click.echo(f"{spec.ref}: NOT COMPARED: {e['reason']}")
    if evaluated.stops:
        raise PerformanceRegression(gate_failure(spec, evaluated), evaluation=evaluated.entry)
