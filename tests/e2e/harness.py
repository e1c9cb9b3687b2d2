"""Start and stop the real processes of the end-to-end tests: a fake provider and a litellm proxy.

Everything binds 127.0.0.1. Each process runs in its own session and is stopped by its PID (SIGTERM to
its process group, then SIGKILL), also when a test fails.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from budget_hook.counting.encodings import vendored_tokenizer_dir

HERE = Path(__file__).parent
VENV_BIN = Path(sys.executable).parent
LITELLM = str(VENV_BIN / "litellm")

#: the proxy's master key, as production runs it: LiteLLM 1.104+ refuses to start without one (and the suite
#: never sets LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY). A config's general_settings.master_key wins.
MASTER_KEY = "sk-e2e-master"

#: what every process gets: offline, quiet, no .env loading (docs/operations.md, "Offline"), a master key
BASE_ENV = {
    "LITELLM_MASTER_KEY": MASTER_KEY,
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOG": "ERROR",
    "LITELLM_DONT_SHOW_FEEDBACK_BOX": "true",
    "LITELLM_MODE": "PRODUCTION",
    "HF_HUB_OFFLINE": "1",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}


def process_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")
           and k != "LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY"}
    env.update(BASE_ENV)
    env["TIKTOKEN_CACHE_DIR"] = str(vendored_tokenizer_dir())
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Process:
    popen: subprocess.Popen
    stderr_path: Path
    port: int
    extra: dict = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        if self.popen.poll() is not None:
            return
        try:
            os.killpg(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.popen.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.pid, signal.SIGKILL)
            self.popen.wait(timeout=15)


def model_entry(group: str, model: str, api_base: str, window: int | None = None, *,
                api_key: str | None = "fake-key", model_id: str | None = None, model_info: dict | None = None,
                **params: object) -> dict:
    """One ``model_list`` entry: group ``group`` served by ``model`` (with its provider prefix) at ``api_base``.

    ``litellm_params`` are model, api_base, api_key (none when ``api_key`` is None, as for AWS-signed Bedrock)
    and then ``params``; ``model_info`` is ``model_id`` as the id, ``window`` as max_input_tokens and then
    ``model_info``'s own keys, and is left out when all are empty (LiteLLM's model map gives the window)."""
    litellm_params = {"model": model, "api_base": api_base, **({} if api_key is None else {"api_key": api_key}),
                      **params}
    info = {**({} if model_id is None else {"id": model_id}),
            **({"max_input_tokens": window} if window else {}), **(model_info or {})}
    return {"model_name": group, "litellm_params": litellm_params, **({"model_info": info} if info else {})}


def start_fake_provider(workdir: Path, models: dict[str, int], *, record: bool = True, instant: bool = False,
                        flags: list[str] | None = None) -> Process:
    """``record``: keep every payload (tests); off for load runs. ``instant``: answer without checks.
    ``flags``: more of its options (``--bill-factor 1.3``, ``--count-delay 2``, ``--count-fail``)."""
    record_path = workdir / "upstream_payloads.jsonl"
    record_path.touch()
    stderr_path = workdir / "upstream.stderr"
    flags = (["--record", str(record_path)] if record else []) + (["--instant"] if instant else []) + (flags or [])
    popen = subprocess.Popen(
        [sys.executable, str(HERE / "fake_provider.py"), "--models", json.dumps(models), *flags],
        stdout=subprocess.PIPE, stderr=stderr_path.open("w"), env=process_env(), start_new_session=True, text=True,
    )
    line = popen.stdout.readline()
    if not line.startswith("READY "):
        popen.kill()
        raise RuntimeError(f"fake provider did not start: {line!r} {stderr_path.read_text()}")
    return Process(popen, stderr_path, int(line.split()[1]), {"record": record_path})


def start_fake_vllm(folder: Path, model: str, window: int, *, files: tuple = (), vision: str = "",
                    name: str = "vllm", args: tuple[str, ...] = ()) -> Process:
    """``fake_vllm.py`` serving ``model`` with ``window`` (``max_model_len``); ``files``: a ``tokenizer.json`` and
    ``tokenizer_config.json`` it serves instead of Llama 3's; ``vision``: the image processor of a vision model;
    ``args``: more of its options (``--tokenize-placeholders``). Its payloads go to ``folder/{name}_payloads.jsonl``
    (``extra["record"]``)."""
    record = folder / f"{name}_payloads.jsonl"
    record.touch()
    stderr = folder / f"{name}.stderr"
    own = ["--tokenizer", str(files[0]), "--chat-template", str(files[1])] if files else []
    popen = subprocess.Popen([sys.executable, str(HERE / "fake_vllm.py"), "--model", model, "--max-model-len",
                              str(window), "--record", str(record), *own, *(["--vision", vision] if vision else []),
                              *args],
                             stdout=subprocess.PIPE, stderr=stderr.open("w"), env=process_env(),
                             start_new_session=True, text=True)
    line = popen.stdout.readline()
    if not line.startswith("READY "):
        popen.kill()
        raise RuntimeError(f"fake vLLM did not start: {line!r} {stderr.read_text()}")
    return Process(popen, stderr, int(line.split()[1]), {"record": record})


def serve_config(folder: Path, config: dict, upstream: Process, env: dict[str, str] | None = None):
    """A module's proxy: ``config`` written as ``folder/litellm_config.yaml``, a proxy started on it (with ``env``);
    yields ``(proxy, upstream)`` and stops both by PID (use as ``yield from`` in a fixture)."""
    import yaml

    path = folder / "litellm_config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    process = start_proxy(path, log_dir=folder, env=env)
    yield process, upstream
    process.stop()
    upstream.stop()


def post(proxy: Process, path: str, body: dict, *, timeout: float = 60,
         headers: dict[str, str] | None = None) -> httpx.Response:
    """``body`` POSTed as JSON to the proxy's ``path`` with the master key (and ``headers``)."""
    return httpx.post(f"{proxy.base_url}{path}", json=body, timeout=timeout,
                      headers={"authorization": f"Bearer {MASTER_KEY}", **(headers or {})})


def assert_stuffed_field_refused(proxy: Process, upstream: Process, path: str, body: dict, marker: str) -> None:
    """``body``, ~18,000 tokens of text carrying ``marker`` in one field, is a 400 block whose count holds that text,
    and nothing carrying ``marker`` reached the provider (the attack reviews' stuffed-field cases)."""
    response = post(proxy, path, body)
    assert response.status_code == 400, response.text[:300]
    assert response.headers["x-budget-decision"] == "blocked"
    assert int(response.headers["x-budget-tokens-before"]) > 15_000  # the field's text was counted
    assert payloads_with(upstream, marker) == []  # nothing reached the provider


def upstream_payloads(upstream: Process) -> list[dict]:
    lines = upstream.extra["record"].read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def payloads_with(upstream: Process, marker: str) -> list[dict]:
    """The request bodies the fake provider received that carry ``marker`` anywhere."""
    return [p["body"] for p in upstream_payloads(upstream) if marker in json.dumps(p["body"])]


def start_proxy(config_path: Path, *, log_dir: Path, timeout: float = 90.0, env: dict[str, str] | None = None,
                expect_failure: bool = False) -> Process:
    """Start ``litellm --config`` on a free loopback port; wait for /health/liveliness (or for the exit).

    The proxy's stderr goes to ``log_dir`` (a pytest temporary folder: never the repository)."""
    port = free_port()
    stderr_path = log_dir / f"proxy-{port}.stderr"
    popen = subprocess.Popen(
        [LITELLM, "--config", str(config_path), "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"],
        stdout=subprocess.DEVNULL, stderr=stderr_path.open("w"), env=process_env(**(env or {})),
        cwd=str(config_path.parent), start_new_session=True,
    )
    proxy = Process(popen, stderr_path, port)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if popen.poll() is not None:
            if expect_failure:
                return proxy
            raise RuntimeError(f"proxy exited with {popen.returncode}:\n{proxy.stderr()[-4000:]}")
        if not expect_failure:
            try:
                if httpx.get(f"{proxy.base_url}/health/liveliness", timeout=2).status_code == 200:
                    return proxy
            except httpx.HTTPError:
                pass
        time.sleep(0.3)
    proxy.stop()
    raise RuntimeError(f"proxy did not {'exit' if expect_failure else 'become ready'} within {timeout}s:\n"
                       f"{proxy.stderr()[-4000:]}")


def decision_records(proxy: Process) -> list[dict]:
    """The JSON records budget_hook wrote on the proxy's stderr."""
    records = []
    # Only complete lines: a long record may be half-written while we read.
    for line in proxy.stderr().split("\n")[:-1]:
        if line.startswith('{"event": "budget_hook.'):
            records.append(json.loads(line))
    return records


def wait_for_record(proxy: Process, call_id: str, timeout: float = 10.0) -> dict:
    """Logging callbacks run after the response is sent: poll for the record of ``call_id``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [r for r in decision_records(proxy) if r.get("call_id") == call_id]
        if found:
            return found[-1]
        time.sleep(0.1)
    raise AssertionError(f"no budget_hook record for call {call_id}; stderr tail:\n{proxy.stderr()[-3000:]}")


def wait_for_lines(path: Path, call_id: str, timeout: float = 10.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            found = [json.loads(line) for line in path.read_text().splitlines() if call_id in line]
            if found:
                return found
        time.sleep(0.1)
    raise AssertionError(f"no line for call {call_id} in {path}")


def rss_kib(pid: int) -> dict[str, int]:
    """Current and peak resident memory of a process and its children (the proxy's worker), in KiB."""
    totals = {"VmRSS": 0, "VmHWM": 0}
    pids = [pid]
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pids += [int(child) for child in children]
    except OSError:
        pass
    for one in pids:
        try:
            for line in Path(f"/proc/{one}/status").read_text().splitlines():
                name = line.split(":")[0]
                if name in totals:
                    totals[name] += int(line.split()[1])
        except OSError:
            continue
    return totals
