"""The exit codes a user can meet are one table (``errors.EXIT_CODES``): every error class exits
with a code the table explains, every code the table explains is one something ends in, and the
command line's own exits (an internal error, a signal) are in it too."""

from __future__ import annotations

import signal

from xpu_release.errors import (
    EXIT_CODES,
    INTERNAL_ERROR,
    INTERRUPTED,
    ManifestError,
    ReleaseError,
)

from ..helpers import user_exit_codes

DOCUMENTED = {c.code for c in EXIT_CODES}


def error_classes() -> list[type[ReleaseError]]:
    found: list[type[ReleaseError]] = [ReleaseError]
    for cls in found:
        found.extend(cls.__subclasses__())
    return found


def test_every_error_class_exits_with_a_documented_code() -> None:
    undocumented = [(c.__name__, c.exit_code) for c in error_classes() if c.exit_code not in DOCUMENTED]

    assert undocumented == []


def test_every_documented_failure_is_something_an_error_class_or_the_cli_ends_in() -> None:
    raised = {c.exit_code for c in error_classes()}
    # Ends that are no error class: success, Click's usage errors (2, as ManifestError),
    # a bug of ours, and the signals the CLI unwinds (128 + the signal's number).
    cli_ends = {0, ManifestError.exit_code, INTERNAL_ERROR}
    cli_ends |= {128 + s for s in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM)}

    assert raised | cli_ends == DOCUMENTED
    assert INTERRUPTED == 128 + signal.SIGINT


def test_the_table_is_one_row_a_code_in_order_each_with_a_meaning_and_an_example() -> None:
    codes = [c.code for c in EXIT_CODES]

    assert codes == sorted(set(codes))
    assert all(c.meaning.strip() and c.example.strip() for c in EXIT_CODES)
    assert all("\n" not in c.meaning + c.example and "|" not in c.meaning + c.example for c in EXIT_CODES)


def test_no_user_input_may_end_in_an_internal_error() -> None:
    assert INTERNAL_ERROR in DOCUMENTED
    assert INTERNAL_ERROR not in user_exit_codes()
    assert user_exit_codes() == DOCUMENTED - {INTERNAL_ERROR}


def test_an_engine_or_http_failure_escaping_a_command_is_the_stacks_never_an_internal_error() -> None:
    # Docker's APIError and requests' errors are OSErrors with no file name: an engine that
    # refused a request outside a container's start ended in exit 70 (issue 53, class 5).
    import errno
    import http.client

    import docker.errors
    import requests
    import requests.exceptions
    import urllib3.exceptions

    from xpu_release.cli.output import as_user_error
    from xpu_release.errors import StackError

    refused = requests.Response()
    refused.status_code = 500
    cases = [
        docker.errors.APIError("500 Server Error: conflict", response=refused),
        docker.errors.NotFound("no such image"),
        requests.exceptions.ConnectionError("Connection aborted"),
        requests.exceptions.ChunkedEncodingError("Connection broken: IncompleteRead"),
        # docker-py reads its streams from urllib3 directly (found by a second adversary)
        urllib3.exceptions.ProtocolError("Connection aborted."),
        urllib3.exceptions.ReadTimeoutError(None, "/build", "Read timed out."),  # type: ignore[arg-type]
        http.client.IncompleteRead(b"partial"),
        TimeoutError("timed out"),
        ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"),
    ]

    for exc in cases:
        said = as_user_error(exc)
        assert isinstance(said, StackError), (type(exc).__name__, said)
        assert "Traceback" not in said.message
    assert not isinstance(
        as_user_error(BrokenPipeError(errno.EPIPE, "Broken pipe")), StackError
    )  # our reader
