#!/usr/bin/env python3
"""Load figures of the hardening work, measured against a release `hf serve` with its embedded
PostgreSQL on loopback:

1. slow bodies: N connections from one address (127.0.0.2) each send a login head declaring a
   100 kB body and one byte of it; meanwhile `GET /health` from another address (127.0.0.3),
   one new connection per request. Reports how the flood was answered, /health latency, and RSS
   idle / at the peak / 30 s after the flood ended;
2. the same, spread over 40 addresses (250 each, within the per-address cap), held until the
   body deadline answers 408;
3. a login flood (c = 256) while `GET /data/crm/account/{id}` runs from another client: how the
   logins were answered and how fast the refusals came, and the record read's latency against
   its idle latency;
4. `kill -9` of the embedded postmaster: how long until a record written before reads again.

Usage: bench/faults.py [--hf target/release/hf] [--connections 19000]
Needs: python3, a release build of hf, PostgreSQL server binaries. Run as a user whose open-file
limit allows the connections (the default 19 000 needs about 19 100).
"""

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

PASSWORD = "faults-bench-password"


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def percentile(values, fraction):
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def summary(values):
    ms = [v * 1000 for v in values]
    return "n=%d p50=%.1f ms p99=%.1f ms max=%.1f ms" % (
        len(ms), percentile(ms, 0.5), percentile(ms, 0.99), max(ms) if ms else float("nan"))


async def request(port, raw, local=None, timeout=10.0):
    """Sends raw bytes on a fresh connection; returns (status, body) or (0, error)."""
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, local_addr=(local, 0) if local else None),
            timeout)
        writer.write(raw)
        data = await asyncio.wait_for(reader.read(), timeout)
        writer.close()
        head, _, body = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/") else 0
        return status, body.decode(errors="replace")
    except Exception as error:  # noqa: BLE001 - every failure is a data point here
        return 0, type(error).__name__


def get(path, token=None):
    return (f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            + (f"Authorization: Bearer {token}\r\n" if token else "") + "\r\n").encode()


def post(path, body, token=None):
    body = json.dumps(body)
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            "Content-Type: application/json\r\n"
            + (f"Authorization: Bearer {token}\r\n" if token else "")
            + f"Content-Length: {len(body)}\r\n\r\n{body}").encode()


async def probe(port, path, stop, latencies, failures, local=None, token=None):
    while not stop.is_set():
        started = time.monotonic()
        status, _ = await request(port, get(path, token), local=local)
        if status == 200:
            latencies.append(time.monotonic() - started)
        else:
            failures.append(status)
        await asyncio.sleep(0.01)


def counts(values):
    found = {}
    for value in values:
        found[value] = found.get(value, 0) + 1
    return found


async def slow_body(port, local, outcomes, hold):
    head = ("POST /auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 100000\r\n\r\n{").encode()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(local, 0))
        writer.write(head)
        data = await asyncio.wait_for(reader.read(), hold)
        writer.close()
        status = int(data.split(b" ")[1]) if data.startswith(b"HTTP/") else "closed"
        outcomes[status] = outcomes.get(status, 0) + 1
    except asyncio.TimeoutError:
        outcomes["held"] = outcomes.get("held", 0) + 1
    except Exception as error:  # noqa: BLE001
        name = type(error).__name__
        outcomes[name] = outcomes.get(name, 0) + 1


async def flood(port, pid, addresses, per_address, hold):
    idle = rss_kib(pid)
    stop = asyncio.Event()
    latencies, failures, outcomes = [], [], {}
    prober = asyncio.create_task(probe(port, "/health", stop, latencies, failures, "127.0.0.3"))
    peak = idle
    started = time.monotonic()
    tasks = []
    for index in range(per_address):
        for address in addresses:
            tasks.append(asyncio.create_task(slow_body(port, address, outcomes, hold)))
        if index % 50 == 0:
            await asyncio.sleep(0)
            peak = max(peak, rss_kib(pid))
    while any(not t.done() for t in tasks):
        peak = max(peak, rss_kib(pid))
        await asyncio.sleep(0.5)
    duration = time.monotonic() - started
    stop.set()
    await prober
    print(f"  answers to the slow bodies: {outcomes} (over {duration:.1f} s)")
    print(f"  GET /health from another address during it: {summary(latencies)}; "
          f"failures {counts(failures)}")
    after = []
    for _ in range(30):
        await asyncio.sleep(1)
        after.append(rss_kib(pid))
    print(f"  RSS idle {idle} KiB, peak {peak} KiB, 30 s after {after[-1]} KiB "
          f"({100 * (after[-1] - idle) / idle:+.1f} % of idle)")


async def login_flood(port, token, record):
    idle = []
    stop = asyncio.Event()
    failures = []
    task = asyncio.create_task(probe(port, record, stop, idle, failures, token=token))
    await asyncio.sleep(5)
    stop.set()
    await task
    print(f"  record read, idle: {summary(idle)}")
    stop = asyncio.Event()
    during, failures = [], []
    reader_task = asyncio.create_task(probe(port, record, stop, during, failures, token=token))
    answers, refusals, successes = {}, [], []
    body = {"username": "admin", "password": PASSWORD}

    async def one_login():
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            started = time.monotonic()
            status, _ = await request(port, post("/auth/login", body))
            elapsed = time.monotonic() - started
            answers[status] = answers.get(status, 0) + 1
            (successes if status == 200 else refusals).append(elapsed)
            if status != 200:
                await asyncio.sleep(0.05)

    await asyncio.gather(*(one_login() for _ in range(256)))
    stop.set()
    await reader_task
    print(f"  logins over 10 s at c=256: {answers}")
    print(f"  accepted logins: {summary(successes)}")
    print(f"  refused logins: {summary(refusals)}")
    print(f"  record read during the flood: {summary(during)}; failures {counts(failures)}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hf", default=os.environ.get("HF_BIN", "target/release/hf"))
    parser.add_argument("--connections", type=int, default=19000)
    parser.add_argument("--port", type=int, default=18095)
    args = parser.parse_args()
    data = tempfile.mkdtemp(prefix="hf-faults-")
    os.chmod(data, 0o755)
    env = dict(os.environ, HF_LISTEN=f"127.0.0.1:{args.port}", HF_DATA_DIR=data,
               HF_ADMIN_PASSWORD=PASSWORD, HF_LOG="warn")
    env.pop("HF_DATABASE_URL", None)
    log = open(os.path.join(data, "serve.log"), "w")
    service = subprocess.Popen([args.hf, "serve", "--demo"], env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{args.port}"
    try:
        for _ in range(1200):
            try:
                urllib.request.urlopen(base + "/health", timeout=1)
                break
            except Exception:  # noqa: BLE001
                time.sleep(0.05)
        time.sleep(2)

        def call(method, path, body=None, token=None):
            request = urllib.request.Request(base + path, method=method,
                                             data=json.dumps(body).encode() if body else None)
            request.add_header("content-type", "application/json")
            if token:
                request.add_header("authorization", "Bearer " + token)
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.load(response)

        token = call("POST", "/auth/login", {"username": "admin", "password": PASSWORD})["token"]
        record_id = call("POST", "/data/crm/account", {"name": "bench"}, token)["id"]
        record = f"/data/crm/account/{record_id}"

        print(f"1. {args.connections} slow-body connections from one address")
        asyncio.run(flood(args.port, service.pid, ["127.0.0.2"], args.connections, 40))
        print("2. 10 000 slow-body connections from 40 addresses (250 each)")
        asyncio.run(flood(args.port, service.pid, [f"127.0.1.{i}" for i in range(1, 41)], 250, 40))
        print("3. login flood")
        asyncio.run(login_flood(args.port, token, record))
        print("4. kill -9 of the embedded postmaster")
        with open(os.path.join(data, "pg", "data", "postmaster.pid")) as pid_file:
            postmaster = int(pid_file.readline())
        os.kill(postmaster, signal.SIGKILL)
        killed = time.monotonic()
        # The backend of a pooled connection may answer once more before it notices its
        # postmaster is gone: wait for the first failure, then for the first success.
        failed = None
        while True:
            try:
                call("GET", record, token=token)
                if failed is not None or time.monotonic() - killed > 5:
                    break
            except Exception:  # noqa: BLE001
                failed = failed or time.monotonic() - killed
            time.sleep(0.05)
        print(f"  first failure after {failed if failed is None else round(failed, 2)} s; the "
              f"record written before reads again after {time.monotonic() - killed:.2f} s")
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=60)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
