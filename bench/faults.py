#!/usr/bin/env python3
"""Load figures of the hardening work, measured against a release `hf serve` with its embedded
PostgreSQL on loopback. Run with `cargo xtask bench faults` (or directly, see Usage).

1. slow bodies: N connections from one address (127.0.0.2) each send a login head declaring a
   100 kB body and one byte of it; meanwhile `GET /health` from another address (127.0.0.3),
   one new connection per request, from a process of its own (so the attacker's event loop
   does not delay it). Reports how the flood was answered, /health latency, and RSS idle / at
   the peak / 30 s after the flood ended;
2. the same, spread over 40 addresses (250 each, within the per-address cap), held until the
   body deadline answers 408;
3. a login flood (c = 256) while `GET /data/crm/account/{id}` runs from another process and
   address (127.0.0.3): how the logins were answered and how fast the refusals came, and the
   record read's latency against its idle latency;
4. `kill -9` of the embedded postmaster while records are read and created: how long until the
   service answers again on its own, and whether every acknowledged create is still there;
5. record reads (wrk): the peak throughput over c = 8..64, then twice that rate offered (each
   of 200 connections paced by a delay) for `--overload-seconds`: throughput of the successful
   reads against the peak, how the excess was answered (503 with `Retry-After`), RSS every 10 s.
   Section 4 runs last, since it restarts the database.

Every section prints the load average (`uptime`) next to its figures: the machine is shared.

Usage: bench/faults.py [--hf target/release/hf] [--connections 20000] [--only 1,3,5]
       [--overload-seconds 120]
Needs: python3, wrk, a release build of hf, PostgreSQL server binaries. Run as root (or with an
open-file limit above the connections): the script raises its own limit, which the service
inherits.
"""

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import socket
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
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


def load_average():
    with open("/proc/loadavg") as loadavg:
        return "load average " + " ".join(loadavg.read().split()[:3])


def probe_process(port, path, seconds, results, local=None, token=None):
    """Requests `path` on fresh connections for `seconds` (or until told to stop through
    `results`' partner event), in a process of its own; sends back (latencies, failures)."""
    latencies, failures = [], []
    raw = get(path, token)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not PROBE_STOP.is_set():
        started = time.monotonic()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10,
                                          source_address=(local, 0) if local else None) as conn:
                conn.sendall(raw)
                data = b""
                while True:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            status = int(data.split(b" ")[1]) if data.startswith(b"HTTP/") else 0
        except OSError as error:
            status = type(error).__name__
        if status == 200:
            latencies.append(time.monotonic() - started)
        else:
            failures.append(status)
        time.sleep(0.01)
    results.put((latencies, failures))


PROBE_STOP = multiprocessing.Event()


class Probe:
    """A probe running in another process until `stop()`."""

    def __init__(self, port, path, local=None, token=None):
        PROBE_STOP.clear()
        self.results = multiprocessing.Queue()
        self.process = multiprocessing.Process(
            target=probe_process, args=(port, path, 3600, self.results, local, token))
        self.process.start()

    def stop(self):
        PROBE_STOP.set()
        latencies, failures = self.results.get()
        self.process.join()
        return latencies, failures


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
    outcomes = {}
    probe = Probe(port, "/health", local="127.0.0.3")
    await asyncio.sleep(0.5)
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
    latencies, failures = probe.stop()
    print(f"  answers to the slow bodies: {outcomes} (over {duration:.1f} s); {load_average()}")
    print(f"  GET /health from another address during it: {summary(latencies)}; "
          f"failures {counts(failures)}")
    after = []
    for _ in range(30):
        await asyncio.sleep(1)
        after.append(rss_kib(pid))
    print(f"  RSS idle {idle} KiB, peak {peak} KiB, 30 s after {after[-1]} KiB "
          f"({100 * (after[-1] - idle) / idle:+.1f} % of idle); {load_average()}")


async def login_flood(port, token, record):
    probe = Probe(port, record, local="127.0.0.3", token=token)
    await asyncio.sleep(10)
    idle, failures = probe.stop()
    print(f"  record read, idle: {summary(idle)}; failures {counts(failures)}; {load_average()}")
    probe = Probe(port, record, local="127.0.0.3", token=token)
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
    during, failures = probe.stop()
    print(f"  logins over 10 s at c=256: {answers}; {load_average()}")
    print(f"  accepted logins: {summary(successes)}")
    print(f"  refused logins (measured inside the flooding client): {summary(refusals)}")
    print(f"  record read during the flood: {summary(during)}; failures {counts(failures)}")


def kill_postmaster(data, call, record, token):
    """Kills the embedded postmaster while readers and writers run; reports when the service
    answered again and whether every acknowledged create survived."""
    import threading

    stop = threading.Event()
    acknowledged, outcomes, lock = [], {}, threading.Lock()

    def writer(n):
        index = 0
        while not stop.is_set():
            index += 1
            try:
                created = call("POST", "/data/crm/account", {"name": f"kill {n} {index}"}, token)
                with lock:
                    acknowledged.append(created["id"])
                    outcomes["201"] = outcomes.get("201", 0) + 1
            except urllib.error.HTTPError as error:
                code = json.load(error).get("errors", [{}])[0].get("code")
                with lock:
                    key = f"{error.code} {code}"
                    outcomes[key] = outcomes.get(key, 0) + 1
                time.sleep(0.05)
            except Exception as error:  # noqa: BLE001
                with lock:
                    key = type(error).__name__
                    outcomes[key] = outcomes.get(key, 0) + 1
                time.sleep(0.05)

    writers = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in writers:
        thread.start()
    time.sleep(2)
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
        if time.monotonic() - killed > 120:
            break
        time.sleep(0.05)
    back = time.monotonic() - killed
    time.sleep(2)
    stop.set()
    for thread in writers:
        thread.join()
    missing = 0
    for record_id in acknowledged:
        try:
            call("GET", f"/data/crm/account/{record_id}", token=token)
        except urllib.error.HTTPError:
            missing += 1
    print(f"  first failure after {failed if failed is None else round(failed, 2)} s; the record "
          f"written before reads again after {back:.2f} s; {load_average()}")
    print(f"  creates during it (4 writers): {outcomes}; acknowledged {len(acknowledged)}, "
          f"missing afterwards {missing}")


def wrk(base, token, connections, seconds, script, extra=()):
    """Runs wrk with `script`; returns its output."""
    command = ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", script,
               *extra, "-H", f"Authorization: Bearer {token}", base]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def wrk_figure(output, name):
    for line in output.splitlines():
        if line.startswith(name):
            return line.split(":", 1)[1].strip()
    return ""


WRK_SCRIPT = """
local pause = tonumber(os.getenv("BENCH_DELAY_MS") or "0")
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) statuses = {}; retry_after = 0 end
function delay() return pause end
function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  if status == 503 and (headers["retry-after"] or headers["Retry-After"]) then
    retry_after = retry_after + 1
  end
end
function done(summary, latency, requests)
  local all, retry = {}, 0
  for _, thread in ipairs(threads) do
    for status, count in pairs(thread:get("statuses")) do
      all[status] = (all[status] or 0) + count
    end
    retry = retry + thread:get("retry_after")
  end
  local line = "statuses:"
  for status, count in pairs(all) do line = line .. " " .. status .. "=" .. count end
  print(line)
  print("retry_after: " .. retry)
  print("seconds: " .. summary.duration / 1e6)
  print("p50: " .. latency:percentile(50) / 1000 .. " ms")
  print("p99: " .. latency:percentile(99) / 1000 .. " ms")
end
"""


def statuses_of(output):
    found = {}
    for item in wrk_figure(output, "statuses").split():
        status, count = item.split("=")
        found[int(status)] = int(count)
    return found


def overload(base, token, record, pid, data, seconds):
    script = os.path.join(data, "read.lua")
    with open(script, "w") as file:
        file.write(WRK_SCRIPT)
    url = base + record
    peak, peak_c, idle_p50 = 0.0, 0, 0.0
    for connections in (8, 16, 32, 64):
        os.environ["BENCH_DELAY_MS"] = "0"
        output = wrk(url, token, connections, 10, script)
        found = statuses_of(output)
        rate = found.get(200, 0) / float(wrk_figure(output, "seconds"))
        print(f"  c={connections}: {rate:.0f} reads/s, p50 {wrk_figure(output, 'p50')}, "
              f"p99 {wrk_figure(output, 'p99')}, statuses {found}; {load_average()}")
        if rate > peak:
            peak, peak_c = rate, connections
            idle_p50 = float(wrk_figure(output, "p50").split()[0])
    connections = 200
    # Each connection sends its next request `delay` after the last answer: at a latency of
    # idle_p50 the offered rate is connections / (delay + idle_p50) = twice the peak.
    delay = max(1, int(1000 * connections / (2 * peak) - idle_p50))
    os.environ["BENCH_DELAY_MS"] = str(delay)
    print(f"  peak {peak:.0f} reads/s at c={peak_c}; offering twice that: {connections} "
          f"connections, {delay} ms between a connection's requests, {seconds} s")
    started_rss = rss_kib(pid)
    process = subprocess.Popen(
        ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", script,
         "-H", f"Authorization: Bearer {token}", url],
        stdout=subprocess.PIPE, text=True)
    samples = []
    while process.poll() is None:
        time.sleep(10)
        samples.append(rss_kib(pid))
    output = process.stdout.read()
    found = statuses_of(output)
    duration = float(wrk_figure(output, "seconds"))
    served = found.get(200, 0) / duration
    answered = sum(found.values()) / duration
    refused = found.get(503, 0)
    print(f"  answered {answered:.0f}/s in all ({answered / peak:.2f} x peak): {served:.0f} "
          f"reads/s served = {100 * served / peak:.0f} % of peak; statuses {found}; "
          f"503 with Retry-After {wrk_figure(output, 'retry_after')} of {refused}; "
          f"p50 {wrk_figure(output, 'p50')}, p99 {wrk_figure(output, 'p99')}; {load_average()}")
    print(f"  RSS before {started_rss} KiB, every 10 s: {samples}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hf", default=os.environ.get("HF_BIN", "target/release/hf"))
    parser.add_argument("--connections", type=int, default=20000)
    parser.add_argument("--port", type=int, default=18095)
    parser.add_argument("--only", default="1,2,3,4,5", help="sections to run, e.g. 1,5")
    parser.add_argument("--overload-seconds", type=int, default=120)
    args = parser.parse_args()
    sections = {int(n) for n in args.only.split(",")}
    # The attacker holds one descriptor per connection; the service inherits the limit too
    # (its own caps decide how many it keeps).
    wanted = args.connections + 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, max(hard, wanted)))
        except (ValueError, OSError):
            # Without the right to raise the hard limit, use what it allows.
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            args.connections = min(args.connections, hard - 300)
            print(f"open-file limit {hard}: {args.connections} slow connections")
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
        print(f"hf {args.hf}, {os.cpu_count()} cores; {load_average()}")

        if 1 in sections:
            print(f"1. {args.connections} slow-body connections from one address")
            asyncio.run(flood(args.port, service.pid, ["127.0.0.2"], args.connections, 40))
        if 2 in sections:
            print("2. 10 000 slow-body connections from 40 addresses (250 each)")
            asyncio.run(flood(args.port, service.pid, [f"127.0.1.{i}" for i in range(1, 41)],
                              250, 40))
        if 3 in sections:
            print("3. login flood")
            asyncio.run(login_flood(args.port, token, record))
        if 5 in sections:
            print("5. record reads at twice the peak rate")
            overload(base, token, record, service.pid, data, args.overload_seconds)
        if 4 in sections:
            print("4. kill -9 of the embedded postmaster under load")
            kill_postmaster(data, call, record, token)
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=60)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
