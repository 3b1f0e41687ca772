"""The ``xpu-release`` command group: shared state, options, output helpers and exit codes.

Every stage lives in its own module; this file only wires them together and maps the
``ReleaseError`` hierarchy (``errors.py``) to messages and exit statuses.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from .. import __version__
from ..errors import INTERNAL_ERROR, INTERRUPTED, OutputError, ReleaseError
from ..guard.locks import LockFile
from ..guard.shown import shown_lines
from ..oci import deadline as answers
from ..oci.credentials import CredentialStore
from ..settings import DEADLINE_ENV, REGISTRIES_ENV, ROOT_ENV, Settings
from .live import LiveLine
from .output import LINE_LIMIT, Verbosity, _say_error, as_user_error, notice

if TYPE_CHECKING:  # the commands import what they use when they run: `--help` stays quick
    from click.shell_completion import CompletionItem

    from ..manifest import Repo
    from ..manifest.registries import Registries

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class State:
    """What one command knows before it starts: the options of the group, the settings read once
    from the environment, and (read when first asked, then kept) the repository and its
    registries file."""

    root_option: str | None
    registries_option: str | None
    debug: bool
    verbosity: Verbosity = field(default_factory=Verbosity)
    settings: Settings = field(default_factory=Settings)  # read once, from the environment
    cache_hold: LockFile | None = None  # this command's shared hold on the cache (release/run/cache.py)
    _repo: Repo | None = field(default=None, init=False)
    _registries: Registries | None = field(default=None, init=False)

    @property
    def repo(self) -> Repo:
        from dataclasses import replace

        from ..manifest import Repo
        from ..manifest.registries import load_registries

        if self._repo is None:
            repo = Repo.discover(self.root_option)
            names: frozenset[str] | None = None
            try:
                self._registries = load_registries(repo.root, self.registries_option)
                names = frozenset(n for n, _ in self._registries.entries)
            except ReleaseError:
                pass  # the registries file's own mistake is reported where it is read
            self._repo = replace(repo, registry_names=names)
        return self._repo

    @property
    def root(self) -> Path:
        return self.repo.root

    @property
    def builder(self) -> str:
        """Who builds (``XPU_RELEASE_BUILDER_ID``, else this host): read once per command."""
        return self.settings.builder_id

    def credentials(self) -> CredentialStore:
        """Credentials for hosts outside a release (a base image's hub): the docker config's."""
        return CredentialStore.from_settings(self.settings)

    def registries(self) -> Registries:
        """The registries file (and ``--registries``' override), parsed once per command."""
        from ..manifest.registries import load_registries

        root = self.root  # finding the repository reads the registries file too
        if self._registries is None:  # it failed then: its mistake is said here
            self._registries = load_registries(root, self.registries_option)
        return self._registries


pass_state = click.make_pass_decorator(State)


def _emit_json(data: Any) -> None:
    from ..jsontext import readable

    click.echo(readable(data))


class ReleaseGroup(click.Group):
    """Maps ``ReleaseError`` to a message on stderr and its exit code; no traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ReleaseError as exc:
            LiveLine.close_all()
            _say_error(exc)
            raise click.exceptions.Exit(exc.exit_code) from None
        except KeyboardInterrupt as exc:
            LiveLine.close_all()
            signum = getattr(exc, "signum", None)
            if signum is None:
                click.echo("interrupted", err=True)
                raise click.exceptions.Exit(INTERRUPTED) from None
            import signal

            click.echo(f"interrupted by {signal.Signals(signum).name}", err=True)
            raise click.exceptions.Exit(128 + signum) from None
        except click.ClickException as exc:
            exc.message = shown_lines(exc.message, LINE_LIMIT)  # type: ignore[misc]  # Click echoes the value it refused
            raise
        except (click.exceptions.Exit, click.exceptions.Abort, BrokenPipeError):
            raise  # Click's own exits, and a reader that closed the pipe (quiet)
        except Exception as exc:
            if isinstance(ctx.obj, State) and ctx.obj.debug:
                raise
            LiveLine.close_all()
            user = as_user_error(exc)
            if user is not None:
                _say_error(user)
                raise click.exceptions.Exit(user.exit_code) from None
            click.echo(
                f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for a traceback)",
                err=True,
            )
            raise click.exceptions.Exit(INTERNAL_ERROR) from None


# The commands that read or write the cache; `cache prune` waits for them.
CACHE_USERS = frozenset({"build", "test", "publish", "release", "build-release", "lock", "verify", "status",
                         "scan", "sbom", "repro", "mirror", "watch", "patch", "withdraw", "reinstate",
                         "promote"})  # fmt: skip


@click.group(cls=ReleaseGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="xpu-release")
@click.option(
    "--root",
    envvar=ROOT_ENV,
    show_envvar=True,
    type=click.Path(file_okay=False),
    help="Repository root (default: found upwards from the current folder).",
)
@click.option(
    "--registries",
    "registries",
    envvar=REGISTRIES_ENV,
    show_envvar=True,
    type=click.Path(dir_okay=False),
    help="A registries file that overrides registries.yaml (e.g. local endpoints).",
)
@click.option(
    "--deadline",
    envvar=DEADLINE_ENV,
    show_envvar=True,
    type=click.FloatRange(min=answers.LEAST * 2, max=86400.0),
    default=answers.DEFAULT_SECONDS,
    show_default=True,
    metavar="SECONDS",
    callback=lambda _ctx, _param, value: _a_number(value),
    help="Stop once registries have been asked this long in a row and none answered (each wait "
    "is told after 10 s).",
)
@click.option("-q", "--quiet", is_flag=True, help="Errors only: no progress, notices or 'wrote …' lines.")
@click.option("-v", "--verbose", is_flag=True, help="On failure, also the full log the error keeps.")
@click.option("--debug", is_flag=True, help="Show tracebacks for internal errors.")
@click.pass_context
def cli(ctx: click.Context, root: str | None, registries: str | None, deadline: float, quiet: bool,
        verbose: bool, debug: bool) -> None:  # fmt: skip
    """Release pipeline for accelerator container images.

    Data goes to stdout, messages to stderr. Shell completion (bash):
    eval "$(_XPU_RELEASE_COMPLETE=bash_source xpu-release)"

    \b
    Examples:
      xpu-release validate
      xpu-release release training-cpu-pytorch:25.03 --dry-run
      xpu-release -q notes training-cpu-pytorch:25.03 --lang en > notes.md
    """
    from dataclasses import replace

    from .. import settings as current

    # The environment, read once here; Click read --root, --registries and --username from it.
    read = replace(Settings.from_env(os.environ), root=root, registries=registries)
    state = State(
        root_option=root,
        registries_option=registries,
        debug=debug,
        verbosity=Verbosity(quiet=quiet, verbose=verbose),
        settings=current.use(read),
    )
    ctx.obj = state
    ctx.with_resource(answers.command(answers.Deadline(deadline, say=notice)))
    if ctx.invoked_subcommand in CACHE_USERS:
        from ..release.run.cache import in_use

        # Held for the whole command: a prune never removes what this run uses.
        waiting = lambda: click.echo("waiting: a cache prune is running", err=True)  # noqa: E731
        state.cache_hold = ctx.with_resource(in_use(read.cache, waiting))


def _a_number(seconds: float) -> float:
    """A deadline Click's range let through that is no number (nan compares false both ways)."""
    if seconds != seconds:
        msg = "nan is no number of seconds"
        raise click.BadParameter(msg, param_hint="'--deadline'")
    return seconds


def complete_refs(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Shell completion of NAME:VERSION from the repository's manifests (nothing on error)."""
    from click.shell_completion import CompletionItem

    from ..manifest import Repo

    root = ctx.find_root().params.get("root") if ctx is not None else None
    try:
        refs = Repo.discover(root).refs()
    except Exception:  # completion must never print an error into the user's shell
        return []
    return [CompletionItem(r) for r in refs if r.startswith(incomplete)]


def ref_argument(name: str = "ref", **kwargs: Any) -> Callable[[F], F]:
    """A NAME:VERSION argument: named so in the usage line, completed from the manifests."""
    nargs = kwargs.get("nargs", 1)
    metavar = "NAME:VERSION" if nargs == 1 else "[NAME:VERSION]..."
    if kwargs.get("required") and nargs != 1:
        metavar = "NAME:VERSION..."
    metavar = kwargs.pop("metavar", metavar)
    return click.argument(name, metavar=metavar, shell_complete=complete_refs, **kwargs)


def json_option(what: str = "The result as JSON on stdout.") -> Callable[[F], F]:
    return click.option("--json", "as_json", is_flag=True, help=what)


class Terminated(KeyboardInterrupt):
    """SIGTERM (a CI cancel) or SIGHUP (a closed terminal): unwound like Ctrl-C, so every
    ``finally`` runs (throwaway containers are removed), then exit 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _terminate(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def main() -> None:
    """Entry point of the ``xpu-release`` script."""
    import signal

    for sig in (signal.SIGTERM, signal.SIGHUP):
        # A signal the parent chose to ignore stays ignored (`nohup` ignores SIGHUP; a shell's
        # background job ignores SIGINT, which Python then leaves alone too).
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _terminate)
    if sys.stdout is None:  # started with stdout closed (`xpu-release list >&-`)
        if sys.stderr is not None:
            sys.stderr.write("error: standard output is closed; redirect it (to /dev/null to discard it)\n")
        sys.exit(OutputError.exit_code)
    try:
        try:
            # Not standalone: Click returns an exit's code instead of leaving, so that the last
            # flush of stdout below happens here, where its failure is handled.
            code = cli(prog_name="xpu-release", standalone_mode=False)
        finally:
            sys.stdout.flush()  # a full device fails here, not in the interpreter's last flush
        sys.exit(code if isinstance(code, int) else 0)
    except click.ClickException as exc:
        exc.message = shown_lines(exc.message, LINE_LIMIT)  # type: ignore[misc]
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except BrokenPipeError:
        # `xpu-release list | head -1`: the reader left. Quietly, as cat would; stdout is pointed
        # at /dev/null so the interpreter's final flush cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
    except OSError as exc:  # the last flush of stdout (a full device, a closed descriptor)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        error = as_user_error(exc) or OutputError(f"cannot write the output ({exc})")
        _say_error(error)
        sys.exit(error.exit_code)
