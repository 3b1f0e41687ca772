#!/usr/bin/env python3
"""xpu-bench: the CPU family's stand-in for the PPU image's ``ljperf --action train``, carried by
the images whose manifest says ``evaluation.carry: xpu-bench`` (as ``/usr/local/bin/xpu-bench``)
and run by the ``evaluate`` stage in throwaway containers.

It trains a tiny decoder-only transformer on synthetic tokens for a fixed number of steps, with
fixed seeds and nothing downloaded, on the CPU, and prints its figures as one JSON line on stdout
(everything else goes to stderr): tokens per second and seconds per step of the median step
after the warm-up steps (a step the machine's other work interrupted does not move them; the
wall-clock tokens per second over every step is there too), the same per second of the
process's own CPU time (``tokens_per_cpu_second``: what the step's work costs, which another
process's load on the machine does not change; the wall clock is what catches a loss of
parallelism), and the process's peak resident memory. The core needs only PyTorch, so it runs
in an SDK image as in the images built on it.

The optimizer is Adam with decoupled weight decay written out in tensor operations:
``torch.optim``'s first step imports ``torch._dynamo`` (3 s of a 9 s run here), a cost of
starting, not of training, that every run of every arm would pay.

The optimisations are switched on by the environment, as in the seed's image:

- ``CHECKPOINT_OPTIMIZATION=true``: selective activation checkpointing (every other block is
  recomputed in the backward pass instead of keeping its activations);
- ``XPU_BENCH_COMPILE=1``: ``torch.compile`` (the inductor backend needs a C++ compiler);
- ``XPU_BENCH_ACCELERATE=1``: the model and optimizer prepared by Hugging Face ``accelerate``;
- ``XPU_BENCH_THREADS=N``: N intra-op threads (``OMP_NUM_THREADS`` works as for any PyTorch);
- ``XPU_BENCH_SLOWDOWN=F``: each step made F times as long by busy work after it (a known
  regression, to hold a gate against: ``bench/evaluate.py``'s 1.25x case).

A switch this image cannot honour (no compiler, no ``accelerate``) is not an error: the line
says ``{"unsupported": "<why>"}`` and the exit status is 0. Any other failure exits non-zero.

Served (``--serve``): the evaluation keeps one container of each arm for the whole stage, so
PyTorch is imported, the model built and ``torch.compile`` run once an arm, not once a round
(a compiled arm takes 36 s to start here and 0.5 s to measure). The server prepares, then answers
each ask with one measurement: the same line a run prints, of the warm-up steps and steps run
anew for that ask. ``--ask SECONDS``, run in the same container (``docker exec``), asks the
server once through two FIFOs in ``XPU_BENCH_SERVE_DIR`` (``/tmp/xpu-bench``) and prints its
line; exit 124 when none came within SECONDS (a server still preparing, or hung), 1 when the
server ended without answering.

This file runs inside images, never in xpu-release's own process: it imports nothing of
xpu-release, and reads its switches from the environment as the image's users would set them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

NAME = "xpu-bench"
FORMAT = 2  # the version of the JSON line's fields (2: tokens_per_cpu_second, step_cpu_seconds)
TRUE = ("1", "true", "yes", "on")
SERVE_DIR = "/tmp/xpu-bench"  # where a server's FIFOs are (XPU_BENCH_SERVE_DIR)
ASK_TIMED_OUT = 124  # --ask's exit status when no answer came in time (as timeout(1) says it)


def _switch(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in TRUE


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=NAME, description=__doc__.splitlines()[0] if __doc__ else None)
    for flag, default, text in (
        ("--steps", 30, "training steps measured, after the warm-up steps"),
        ("--warmup-steps", 5, "steps run first and not measured"),
        ("--batch", 8, "sequences per step"),
        ("--seq", 64, "tokens per sequence"),
        ("--dim", 128, "model width"),
        ("--layers", 2, "transformer blocks"),
        ("--heads", 4, "attention heads"),
        ("--vocab", 512, "vocabulary size"),
        ("--seed", 0, "the seed of the weights and of the tokens"),
    ):
        parser.add_argument(flag, type=int, default=default, help=text)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--serve", action="store_true", help="prepare once, then measure at each --ask")
    mode.add_argument("--ask", type=float, metavar="SECONDS", help="ask the server for one line")
    args = parser.parse_args(argv)
    if min(args.steps, args.batch, args.seq, args.dim, args.layers, args.heads, args.vocab) < 1:
        parser.error("sizes and --steps must be at least 1")
    if args.dim % args.heads or args.warmup_steps < 0:
        parser.error("--dim must be a multiple of --heads, and --warmup-steps at least 0")
    return args


def _unsupported() -> str | None:
    """Why this image cannot run the variant the environment asks for (None: it can)."""
    if _switch("XPU_BENCH_COMPILE"):
        compiler = os.environ.get("CXX") or "c++"
        if shutil.which(compiler) is None and shutil.which("g++") is None:
            return f"torch.compile needs a C++ compiler; this image has none ({compiler}, g++)"
    if _switch("XPU_BENCH_ACCELERATE"):
        try:
            import accelerate  # noqa: F401
        except ImportError:
            return "the accelerate library is not installed in this image"
    return None


def _model(torch: Any, args: argparse.Namespace, checkpointed: bool) -> Any:
    nn, functional = torch.nn, torch.nn.functional
    module: Any = nn.Module

    class Block(module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(args.dim), nn.LayerNorm(args.dim)
            self.qkv = nn.Linear(args.dim, 3 * args.dim)
            self.out = nn.Linear(args.dim, args.dim)
            wide = 4 * args.dim
            self.mlp = nn.Sequential(nn.Linear(args.dim, wide), nn.GELU(), nn.Linear(wide, args.dim))

        def forward(self, x: Any) -> Any:
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, args.heads, d // args.heads).unbind(2)
            att = functional.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
            )
            x = x + self.out(att.transpose(1, 2).reshape(b, t, d))
            return x + self.mlp(self.ln2(x))

    class Decoder(module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.tokens = nn.Embedding(args.vocab, args.dim)
            self.positions = nn.Embedding(args.seq, args.dim)
            self.blocks = nn.ModuleList(Block() for _ in range(args.layers))
            self.ln = nn.LayerNorm(args.dim)
            self.head = nn.Linear(args.dim, args.vocab, bias=False)

        def forward(self, ids: Any) -> Any:
            x = self.tokens(ids) + self.positions(torch.arange(ids.shape[1]))
            for i, block in enumerate(self.blocks):
                if checkpointed and i % 2 == 0:  # selective: every other block is recomputed
                    x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
                else:
                    x = block(x)
            return self.head(self.ln(x))

    return Decoder()


def _spin(seconds: float) -> None:
    """Busy work for ``seconds`` of wall time (a slowdown that costs CPU, as a slower image does)."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


def _tokens(torch: Any, args: argparse.Namespace) -> Any:
    """Synthetic sequences with structure to learn (each token follows from the one before),
    the same for every run of the same seed."""
    gen = torch.Generator().manual_seed(args.seed)
    start = torch.randint(0, args.vocab, (args.batch, 1), generator=gen)
    steps = torch.arange(args.seq + 1).unsqueeze(0)
    return (start * 7 + steps * 13) % args.vocab


class AdamW:
    """Adam with decoupled weight decay (Loshchilov and Hutter), as ``torch.optim.AdamW``
    computes it with its defaults, on the parameters' tensors directly."""

    def __init__(self, torch: Any, params: list[Any], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.01) -> None:  # fmt: skip
        self.torch, self.params, self.lr, self.betas, self.eps, self.wd = (
            torch,
            params,
            lr,
            betas,
            eps,
            weight_decay,
        )
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]
        self.t = 0

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        self.t += 1
        b1, b2 = self.betas
        c1, c2 = 1 - b1**self.t, 1 - b2**self.t
        with self.torch.no_grad():
            for p, m, v in zip(self.params, self.m, self.v, strict=True):
                if p.grad is None:
                    continue
                p.mul_(1 - self.lr * self.wd)
                m.mul_(b1).add_(p.grad, alpha=1 - b1)
                v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                p.addcdiv_(m, (v / c2).sqrt_().add_(self.eps), value=-self.lr / c1)


class Trainer:
    """The model, its optimizer and its data, made once; ``measure`` trains the warm-up steps and
    the measured steps and returns their figures (a served arm measures again and again)."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch

        self.torch, self.args = torch, args
        torch.manual_seed(args.seed)
        threads = os.environ.get("XPU_BENCH_THREADS", "").strip()
        if threads:
            torch.set_num_threads(max(1, int(threads)))
        self.checkpointed, self.compiled, self.accelerated = (
            _switch("CHECKPOINT_OPTIMIZATION"),
            _switch("XPU_BENCH_COMPILE"),
            _switch("XPU_BENCH_ACCELERATE"),
        )
        self.slowdown = max(1.0, float(os.environ.get("XPU_BENCH_SLOWDOWN", "").strip() or 1))
        model = _model(torch, args, self.checkpointed)
        self.backward = None
        if self.accelerated:
            from accelerate import Accelerator

            accelerator = Accelerator(cpu=True)
            model = accelerator.prepare(model)
            self.backward = accelerator.backward
        self.optimizer = AdamW(torch, list(model.parameters()), lr=3e-3)
        self.model = torch.compile(model) if self.compiled else model
        data = _tokens(torch, args)
        self.inputs, self.targets = data[:, :-1], data[:, 1:]

    def measure(self) -> dict[str, Any]:
        torch, args = self.torch, self.args
        losses: list[float] = []
        times: list[float] = []
        cpu: list[float] = []
        for step in range(args.warmup_steps + args.steps):
            started, used = time.perf_counter(), time.process_time()
            self.optimizer.zero_grad()
            logits = self.model(self.inputs)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, args.vocab), self.targets.reshape(-1))
            (self.backward or (lambda value: value.backward()))(loss)
            self.optimizer.step()
            losses.append(float(loss.item()))
            _spin((self.slowdown - 1) * (time.perf_counter() - started))
            if step >= args.warmup_steps:
                times.append(time.perf_counter() - started)
                cpu.append(time.process_time() - used)
        # Per the median step: a step the machine's other work interrupted does not move it (the
        # wall-clock figure over every step is there too).
        median, median_cpu = statistics.median(times), statistics.median(cpu)
        tokens = args.batch * args.seq
        return {
            "tokens_per_second": round(tokens / median, 3),
            "tokens_per_cpu_second": round(tokens / max(median_cpu, 1e-9), 3),
            "step_seconds": round(median, 6),
            "step_cpu_seconds": round(median_cpu, 6),
            "wall_tokens_per_second": round(tokens * len(times) / sum(times), 3),
            "peak_memory_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "threads": torch.get_num_threads(),
            "torch": str(torch.__version__),
            "loss_first": round(losses[0], 4),
            "loss_last": round(losses[-1], 4),
            "variant": {
                "checkpoint": self.checkpointed,
                "compile": self.compiled,
                "accelerate": self.accelerated,
            },
        }


def run(args: argparse.Namespace) -> dict[str, Any]:
    return Trainer(args).measure()


def _fifos() -> tuple[Path, Path]:
    folder = Path(os.environ.get("XPU_BENCH_SERVE_DIR") or SERVE_DIR)
    return folder / "ask", folder / "answer"


def serve(args: argparse.Namespace, head: dict[str, Any]) -> int:
    """Prepare once, then answer every ask with one line: a measurement, or why this variant
    cannot run here (every ask alike). Runs until the container is removed."""
    ask, answer = _fifos()
    ask.parent.mkdir(parents=True, exist_ok=True)
    for fifo in (ask, answer):
        if not fifo.exists():
            os.mkfifo(fifo, 0o600)
    why = _unsupported()
    trainer = None if why is not None else Trainer(args)
    while True:
        with ask.open() as asked:  # blocks until an --ask opens it
            asked.read()
        line = dict(head)
        if trainer is None:
            line["unsupported"] = why
        else:
            line.update(trainer.measure())
        with answer.open("w") as out:  # blocks until that --ask opens it to read
            out.write(json.dumps(line, sort_keys=True) + "\n")


def ask_once(seconds: float) -> int:
    """Ask this container's server for one measurement and print its line."""

    def timed_out(*_: Any) -> None:
        sys.stderr.write(f"{NAME}: no answer from the server within {seconds:g} s\n")
        os._exit(ASK_TIMED_OUT)

    signal.signal(signal.SIGALRM, timed_out)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    ask, answer = _fifos()
    while not answer.exists():  # the server has not made its FIFOs yet
        time.sleep(0.02)
    with ask.open("w") as asking:  # blocks until the server is ready to read
        asking.write("measure\n")
    with answer.open() as answered:
        line = answered.readline()
    signal.setitimer(signal.ITIMER_REAL, 0)
    if not line.endswith("\n"):
        sys.stderr.write(f"{NAME}: the server ended without answering\n")
        return 1
    sys.stdout.write(line)
    sys.stdout.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _arguments(sys.argv[1:] if argv is None else argv)
    line: dict[str, Any] = {"workload": NAME, "format": FORMAT, "steps": args.steps,
                            "sha256": hashlib.sha256(Path(__file__).read_bytes()).hexdigest()}  # fmt: skip
    if args.ask is not None:
        return ask_once(args.ask)
    if args.serve:
        return serve(args, line)
    why = _unsupported()
    if why is not None:
        line["unsupported"] = why
    else:
        line.update(run(args))
    sys.stdout.write(json.dumps(line, sort_keys=True) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
