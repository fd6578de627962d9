#!/usr/bin/env python3
"""Load figures of the hardening work, measured against a release `hf serve` with its embedded
PostgreSQL on loopback. Run with `cargo xtask bench faults` (or directly, see Usage).

1. slow bodies: N connections from one address (127.0.0.2) each send a login head declaring a
   100 kB body and one byte of it, opened by as many attacking processes as the open-file
   limit needs (each holds one descriptor per connection); meanwhile `GET /health` from another
   address (127.0.0.3), one new connection per request, from a process of its own. Reports how
   the flood was answered, /health latency, the service's open descriptors at the peak, and
   RSS idle / at the peak / 30 s after the flood ended;
2. the same, spread over 40 addresses (250 each, within the per-address cap), held until the
   body deadline answers 408;
3. logins at 5 a second (all served), then a login flood (hf-load: c = 256 in a closed loop,
   then `--login-rate` in an open loop) while
   `GET /data/crm/account/{id}` runs from another process and address (127.0.0.3): how the
   logins were answered, the refusals' latency timed apart from the logins served, and the
   record read's latency against its idle latency (timed before the floods and again after);
4. `kill -9` of the embedded postmaster while records are read and created: how long until the
   service answers again on its own, and whether every acknowledged create is still there;
5. record reads: the peak throughput over c = 8..64 (hf-load, closed loop), then twice that
   rate offered in an open loop (hf-load `--rate`: requests are due at a fixed rate whatever
   the answers) for `--overload-seconds`: reads served per second against the peak, how the
   excess was answered (503 with `Retry-After`), RSS every report interval (a minute for runs
   of two minutes or more), then the peak once more, since the machine's speed drifts. With
   `--pin` it also prints what a read (at the peak) and a refusal (under the overload) cost the
   service and its database in CPU, and the most reads a second their core allows at that cost
   (see `overload`). Section 4 runs last, since it restarts the database;
6. slow readers: 1 000 connections from 4 addresses (250 each, within the per-address cap), each
   with a 4 kB receive buffer, ask for `/openapi.json` and never read; held for 45 s. Reports,
   every 5 s, the kernel's TCP memory and orphaned sockets (`/proc/net/sockstat`), the
   service's open descriptors and RSS: what the unread responses hold, and when the send
   timeout (`HF_SEND_TIMEOUT`) lets it go;
7. pipelined requests left unanswered: one connection sends 20 000 `GET /openapi.json` in one
   go (HTTP/1.1 pipelining) with a 4 kB receive buffer and reads nothing, for 12 s: the service's
   CPU use (from /proc) and RSS growth; then 100 such connections: RSS and the kernel's TCP
   memory;
8. slow heads on kept-alive connections: 1 000 connections from 4 addresses (250 each) each send
   a request, read its answer, then send the head of the next one a header line a second (HTTP
   servers often time only a connection's first head). Reports how and when each was answered
   (`HF_HEADER_TIMEOUT`, 5 s, from the head's first byte) and `/health` meanwhile;
9. a network partition from the database under reads: a second `hf serve` on the same database
   connects to it through a relay of this script's on an address of its own (127.88.0.1), and
   `GET /data/crm/account/{id}` runs against it in a closed loop (hf-load, c = 16) for 45 s; at
   10 s the path is cut for 20 s (a blackhole route drops what the instance sends, and the relay
   stops carrying answers), then restored. Reports each second's answers and the slowest of
   them, the instance's RSS, when the first refusal came after the cut, and when the first
   second all served came after the restore. Needs root (`ip route`). The relay, in Python,
   caps the reads' rate: this section measures how a partition is answered, not throughput;
10. the same with a database that stops answering without refusing anything (a host that
   froze, or a network that drops connection attempts silently): no route is cut; the relay
   carries nothing for 20 s and accepts new connections only to say nothing on them, so each
   attempt to connect waits for the instance's create timeout (5 s). Reports the same figures;
11. a full disk: a second `hf serve --demo` whose data directory (embedded cluster included) is
   on a 256 MiB tmpfs of its own; 200 creates, then the file system is filled with a file and
   300 more creates are sent (those that need a new page are refused); then a `CHECKPOINT` and a
   switch of the log ahead make PostgreSQL need a new log segment, which it cannot write, so it
   stops, and it cannot start again. Reports how the creates were answered, the log lines the
   instance wrote in 20 s down (at `HF_LOG=warn`), what `/status` said, how long after the file
   was removed the instance served again, and whether every acknowledged create is there. Needs
   root (`mount`).

Every section prints the load average (`uptime`) next to its figures: the machine is shared.

`--pin` keeps the load generators and probes (this script and its children) on the first core
and the service with its embedded PostgreSQL on the others, as a load test on two machines would:
on a shared machine, a generator offering twice the peak takes CPU from the service it measures
(the open loop of section 5 falls behind, and the service serves less because the generator
runs, not because it refuses badly).

Usage: bench/faults.py [--hf target/release/hf] [--load target/release/hf-load]
       [--connections 20000] [--only 1,3,5] [--overload-seconds 120] [--login-rate 2000] [--pin]
Needs: python3, release builds of hf and hf-load, PostgreSQL server binaries.
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


def cpu_seconds(pid):
    """CPU time of `pid` and every process below it (the embedded cluster's postmaster and
    backends), including the children they have reaped (backends that exited)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append((int(entry), fields))
    ticks, stack = 0, [pid]
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        ticks += sum(int(f) for f in fields[11:15])
    except OSError:
        return 0.0
    while stack:
        for child, fields in children.get(stack.pop(), []):
            # utime, stime, cutime, cstime
            ticks += sum(int(f) for f in fields[11:15])
            stack.append(child)
    return ticks / os.sysconf("SC_CLK_TCK")


def percentile(values, fraction):
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def summary(values):
    ms = [v * 1000 for v in values]
    return "n=%d p50=%.1f ms p99=%.1f ms max=%.1f ms" % (
        len(ms), percentile(ms, 0.5), percentile(ms, 0.99), max(ms) if ms else float("nan"))


def get(path, token=None):
    return (f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            + (f"Authorization: Bearer {token}\r\n" if token else "") + "\r\n").encode()


def api_request(base, method, path, body=None, token=None):
    """A JSON request to the service at `base`, with the bearer `token` if any."""
    request = urllib.request.Request(base + path, method=method,
                                     data=json.dumps(body).encode() if body else None)
    request.add_header("content-type", "application/json")
    if token:
        request.add_header("authorization", "Bearer " + token)
    return request


def load_average():
    with open("/proc/loadavg") as loadavg:
        return "load average " + " ".join(loadavg.read().split()[:3])


def probe_process(port, path, seconds, results, local=None, token=None):
    """Requests `path` on fresh connections for `seconds` (or until told to stop through
    `results`' partner event), in a process of its own; sends back (latencies, failures).

    The probe asks for a higher scheduling priority (nice -5, when allowed): on a 2-core machine
    it shares the cores with the load generator, and without it the time the probe itself
    waits for a core after its answer arrived would be counted as the service's latency."""
    try:
        os.nice(-5)
    except OSError:
        pass
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


def attack_process(port, addresses, per_address, hold, results):
    """Opens `per_address` slow-body connections from each of `addresses`, in a process of its
    own; sends back how they were answered."""
    outcomes = {}

    async def attack():
        tasks = []
        for index in range(per_address):
            for address in addresses:
                tasks.append(asyncio.create_task(slow_body(port, address, outcomes, hold)))
            if index % 50 == 0:
                await asyncio.sleep(0)
        await asyncio.gather(*tasks)

    asyncio.run(attack())
    results.put(outcomes)


def open_files(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


async def flood(port, pid, addresses, per_address, hold):
    """`per_address` slow-body connections from each of `addresses`, opened by as many
    processes as the open-file limit needs, while /health is timed from another address."""
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 500
    per_process = max(1, limit // len(addresses))
    shares = [min(per_process, per_address - start) for start in range(0, per_address, per_process)]
    idle = rss_kib(pid)
    idle_files = open_files(pid)
    probe = Probe(port, "/health", local="127.0.0.3")
    await asyncio.sleep(0.5)
    peak, peak_files = idle, idle_files
    started = time.monotonic()
    results = multiprocessing.Queue()
    attackers = [multiprocessing.Process(target=attack_process,
                                         args=(port, addresses, share, hold, results))
                 for share in shares]
    for attacker in attackers:
        attacker.start()
    outcomes = {}
    for _ in attackers:
        while True:
            peak = max(peak, rss_kib(pid))
            peak_files = max(peak_files, open_files(pid))
            try:
                found = results.get(timeout=0.2)
                break
            except Exception:  # noqa: BLE001 - queue.Empty: not finished yet
                continue
        for key, count in found.items():
            outcomes[key] = outcomes.get(key, 0) + count
    for attacker in attackers:
        attacker.join()
    duration = time.monotonic() - started
    latencies, failures = probe.stop()
    print(f"  answers to the slow bodies ({len(attackers)} attacking processes): {outcomes} "
          f"(over {duration:.1f} s); {load_average()}")
    print(f"  GET /health from another address during it: {summary(latencies)}; "
          f"failures {counts(failures)}")
    print(f"  open descriptors of the service: {idle_files} idle, at most {peak_files} during it")
    after = []
    for _ in range(30):
        await asyncio.sleep(1)
        after.append(rss_kib(pid))
    print(f"  RSS idle {idle} KiB, peak {peak} KiB, 30 s after {after[-1]} KiB "
          f"({100 * (after[-1] - idle) / idle:+.1f} % of idle); {load_average()}")


def hf_load(load, url, *options, on_interval=None):
    """Runs hf-load; calls `on_interval` with each interval report; returns the total."""
    process = subprocess.Popen([load, "--url", url, *map(str, options)],
                               stdout=subprocess.PIPE, text=True)
    total = None
    for line in process.stdout:
        report = json.loads(line)
        if report["kind"] == "interval":
            if on_interval:
                on_interval(report)
        else:
            total = report
    if process.wait() != 0 or total is None:
        raise RuntimeError(f"hf-load failed ({process.returncode})")
    return total


def latency(report, status):
    figures = report["latency_ms"].get(str(status))
    if not figures:
        return "none"
    return "p50 %.1f ms, p99 %.1f ms, max %.1f ms" % (
        figures["p50"], figures["p99"], figures["max"])


# How long each phase of the login floods lasts, the idle ones included. The probe reads about 90
# times a second, so a phase's p99 is its 18th-slowest read: over 10 s (the 9th-slowest of
# about 900) one stray delay of the machine moved the idle p99, and with it every ratio, by half.
FLOOD_SECONDS = 20


def login_flood(load, port, token, record, login_rate):
    """Logins from hf-load, at 5 a second, at c = 256 in a closed loop, then at `login_rate` per
    second in an open loop, while a record read is timed from another process and address."""
    probe = Probe(port, record, local="127.0.0.3", token=token)
    time.sleep(FLOOD_SECONDS)
    idle, failures = probe.stop()
    print(f"  record read, idle: {summary(idle)}; failures {counts(failures)}; {load_average()}")
    body = json.dumps({"username": "admin", "password": PASSWORD})
    # A closed loop that never pauses keeps 256 logins outstanding, so each waits for the 255
    # before it: its latency is 256 / the refusal rate, whatever a refusal costs. An open loop
    # (a fixed rate far above what hashing serves) times refusals at a given load.
    sources = ",".join(f"127.0.0.{n}" for n in range(20, 25))
    for options, label in (
            # Not a flood: a few logins a second, each hashed, as a busy day brings them.
            (("--rate", 5, "--connections", 4), "open loop, 5 logins/s, none refused"),
            (("--connections", 256), "c=256, closed loop, keep-alive, no pause"),
            (("--rate", login_rate, "--connections", 1000, "--sources", sources),
             f"open loop, {login_rate} logins/s")):
        probe = Probe(port, record, local="127.0.0.3", token=token)
        report = hf_load(load, f"http://127.0.0.1:{port}/auth/login", "--method", "POST",
                         "--body", body, "--seconds", FLOOD_SECONDS, *options)
        during, failures = probe.stop()
        refused = {s: n for s, n in report["statuses"].items() if s != "200"}
        print(f"  logins over {FLOOD_SECONDS} s, {label}: {report['statuses']}, Retry-After on "
              f"{report['retry_after']}, transport errors {report['errors']}; {load_average()}")
        print(f"    logins served: {latency(report, 200)}")
        for status in refused:
            print(f"    refused {status}: {latency(report, status)}")
        print(f"    record read during the flood: {summary(during)}; failures {counts(failures)}"
              f" ({percentile(during, 0.99) / percentile(idle, 0.99):.1f} x the idle p99)")
    # The machine's speed drifts (it is shared): the idle read once more, after the floods,
    # tells a slower machine from a flood's effect.
    probe = Probe(port, record, local="127.0.0.3", token=token)
    time.sleep(FLOOD_SECONDS)
    after, failures = probe.stop()
    print(f"  record read, idle again after the floods: {summary(after)}; failures "
          f"{counts(failures)}; {load_average()}")


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


def overload(load, base, token, record, pid, seconds, service_cores):
    """The peak rate of record reads (closed loop), then twice it offered in an open loop.

    With `service_cores` (the cores the service and its database have to themselves, known
    under `--pin`), it also prints the most reads a second those cores allow at the offered
    rate, from what a read and a refusal cost them in this run: at the peak a read costs
    `read` CPU-seconds (the service and its backend); under the overload every request not
    served is a refusal costing `refusal`, so `served * read + refused * refusal` fills the
    cores, and at most `(cores - offered * refusal) / (read - refusal)` reads are served. At
    twice the peak that is `(read - 2 * refusal) / (read - refusal)` of the peak: a refusal
    must cost under a tenth of a read for 90 %, and the cheaper the read, the smaller the
    share left."""
    url = base + record
    auth = ("--header", f"Authorization: Bearer {token}")
    peak, peak_c, read_cost = 0.0, 0, None
    for connections in (8, 16, 32, 64):
        before = cpu_seconds(pid)
        report = hf_load(load, url, *auth, "--connections", connections, "--seconds", 10)
        used = cpu_seconds(pid) - before
        rate = report["per_second"].get("200", 0.0)
        served = report["statuses"].get("200", 0)
        print(f"  c={connections}: {rate:.0f} reads/s, {latency(report, 200)}, statuses "
              f"{report['statuses']}; the service and its database used {used:.1f} CPU-s "
              f"({1e6 * used / max(served, 1):.1f} µs a read); {load_average()}")
        if rate > peak:
            peak, peak_c, read_cost = rate, connections, used / max(served, 1)
    offered = 2 * peak
    every = 60 if seconds >= 120 else 10
    # hf refuses an address's connections beyond 256; spread the open loop's connections.
    sources = ",".join(f"127.0.0.{n}" for n in range(10, 15))
    print(f"  peak {peak:.0f} reads/s at c={peak_c}; offering {offered:.0f}/s in an open loop "
          f"for {seconds} s (at most 1000 connections from 5 addresses)")
    print(f"  RSS before: {rss_kib(pid)} KiB; {load_average()}")

    def interval(report):
        served = report["per_second"].get("200", 0.0)
        answered = sum(report["statuses"].values()) / report["seconds"]
        print(f"    {served:.0f} reads/s served ({100 * served / peak:.0f} % of peak), "
              f"{answered:.0f}/s answered, statuses {report['statuses']}, Retry-After on "
              f"{report['retry_after']}; 200 {latency(report, 200)}; RSS {rss_kib(pid)} KiB; "
              f"{load_average()}", flush=True)

    before = cpu_seconds(pid)
    report = hf_load(load, url, *auth, "--rate", f"{offered:.0f}", "--connections", 1000,
                     "--sources", sources, "--seconds", seconds, "--report-every", every,
                     on_interval=interval)
    used = cpu_seconds(pid) - before
    served = report["per_second"].get("200", 0.0)
    answered = sum(report["statuses"].values()) / report["seconds"]
    excess = sum(n for s, n in report["statuses"].items() if s != "200")
    with_retry = sum(report["retry_after"].values())
    print(f"  whole run: offered {offered:.0f}/s, answered {answered:.0f}/s; {served:.0f} reads/s "
          f"served = {100 * served / peak:.0f} % of peak; statuses {report['statuses']}; "
          f"{with_retry} of {excess} other answers with Retry-After; transport errors "
          f"{report['errors']}, not sent {report['unsent']}")
    print(f"  latency from when due: 200 {latency(report, 200)}; 503 {latency(report, 503)}; "
          f"RSS after {rss_kib(pid)} KiB; {load_average()}")
    if service_cores and read_cost and excess:
        # What the refusals cost: the CPU used beyond the reads served, at the peak's cost each.
        refusal_cost = (used - report["statuses"].get("200", 0) * read_cost) / excess
        ceiling = (service_cores - offered * refusal_cost) / (read_cost - refusal_cost)
        print(f"  the service and its database used {used / report['seconds']:.2f} of their "
              f"{service_cores} core(s); a read cost {1e6 * read_cost:.1f} µs at the peak, a "
              f"refusal {1e6 * refusal_cost:.1f} µs, so these cores serve at most "
              f"{ceiling:.0f} reads/s ({100 * ceiling / peak:.0f} % of peak) while refusing "
              f"the rest of {offered:.0f}/s; served {100 * served / max(ceiling, 1.0):.0f} % "
              f"of that")
    # The machine's speed drifts (it is shared): the peak once more, at the same concurrency,
    # tells how much of a shortfall is the machine's rather than the overload's.
    again = hf_load(load, url, *auth, "--connections", peak_c, "--seconds", 10)
    rate = again["per_second"].get("200", 0.0)
    print(f"  the peak again after the overload (c={peak_c}): {rate:.0f} reads/s; served during the "
          f"overload = {100 * served / max(rate, 1.0):.0f} % of it, "
          f"{100 * served / ((peak + rate) / 2 or 1.0):.0f} % of the mean of both peaks; "
          f"{load_average()}")


def relay(address, port, socket_path, ready):
    """Relays TCP connections on `address:port` to the database's Unix socket; SIGUSR1 stops
    carrying bytes (what arrives is held), SIGUSR2 carries on (see section 9)."""
    async def serve():
        carrying = asyncio.Event()
        carrying.set()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGUSR1, carrying.clear)
        loop.add_signal_handler(signal.SIGUSR2, carrying.set)

        async def carry(reader, writer):
            try:
                while True:
                    await carrying.wait()
                    data = await reader.read(65536)
                    if not data:
                        break
                    await carrying.wait()
                    writer.write(data)
                    await writer.drain()
            except OSError:
                pass
            finally:
                writer.close()

        async def connected(reader, writer):
            try:
                server_reader, server_writer = await asyncio.open_unix_connection(socket_path)
            except OSError:
                writer.close()
                return
            await asyncio.gather(carry(reader, server_writer), carry(server_reader, writer))

        server = await asyncio.start_server(connected, address, port)
        ready.set()
        await server.serve_forever()

    asyncio.run(serve())


def blackhole(address, action):
    """Adds (`replace`) or removes (`del`) a blackhole route for `address`: every packet sent to
    it is dropped, as a partition drops it."""
    subprocess.run(["ip", "route", action, "blackhole", f"{address}/32", "table", "local"],
                   check=action != "del", stderr=subprocess.DEVNULL)


def partition(hf, load, data, port, token, record, taskset, hang=False):
    """A second instance reads through a path to the database that is cut for 20 s (section 9),
    or, with `hang`, that stops answering for 20 s without refusing anything: the relay accepts
    new connections and says nothing on them (section 10)."""
    import threading

    address, relay_port = "127.88.0.1", port + 2
    blackhole(address, "del")
    ready = multiprocessing.Event()
    socket_path = os.path.join(data, "pg", "run", ".s.PGSQL.5432")
    relaying = multiprocessing.Process(target=relay,
                                       args=(address, relay_port, socket_path, ready))
    relaying.start()
    ready.wait(10)
    second_data = tempfile.mkdtemp(prefix="hf-faults-second-")
    os.chmod(second_data, 0o755)
    env = dict(os.environ, HF_LISTEN=f"127.0.0.1:{port + 1}", HF_DATA_DIR=second_data,
               HF_ADMIN_PASSWORD=PASSWORD, HF_LOG="warn",
               HF_DATABASE_URL=f"host={address} port={relay_port} user=postgres dbname=hf")
    log = open(os.path.join(second_data, "serve.log"), "w")
    second = subprocess.Popen([*taskset, hf, "serve"], env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port + 1}"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(base + record, timeout=1)
            except urllib.error.HTTPError:
                break
            except Exception:  # noqa: BLE001
                time.sleep(0.05)
        time.sleep(1)
        started = time.monotonic()
        cut_at, restored_at, events = 10.0, 30.0, {}

        def cut_and_restore():
            time.sleep(cut_at)
            if not hang:
                blackhole(address, "replace")
            relaying_pid = relaying.pid
            os.kill(relaying_pid, signal.SIGUSR1)
            events["cut"] = time.monotonic() - started
            time.sleep(restored_at - cut_at)
            os.kill(relaying_pid, signal.SIGUSR2)
            if not hang:
                blackhole(address, "del")
            events["restored"] = time.monotonic() - started

        cutter = threading.Thread(target=cut_and_restore)
        cutter.start()
        first_refusal, back = None, None

        def interval(report):
            nonlocal first_refusal, back
            now = time.monotonic() - started
            statuses = report["statuses"]
            slowest = max((figures["max"] for figures in report["latency_ms"].values()),
                          default=0.0)
            print(f"    {now:4.0f} s: {statuses}, errors {report['errors']}, slowest "
                  f"{slowest:.0f} ms; RSS {rss_kib(second.pid)} KiB", flush=True)
            if "cut" in events and first_refusal is None and set(statuses) - {"200"}:
                first_refusal = now - events["cut"]
            if "restored" in events and back is None and statuses and set(statuses) == {"200"}:
                back = now - events["restored"]

        print(f"  RSS before: {rss_kib(second.pid)} KiB; {load_average()}")
        report = hf_load(load, base + record, "--header", f"Authorization: Bearer {token}",
                         "--connections", 16, "--seconds", 45, "--report-every", 1,
                         on_interval=interval)
        cutter.join()
        def seconds(value):
            return "never" if value is None else f"{value:.1f} s"

        print(f"  whole run: statuses {report['statuses']}, transport errors {report['errors']}; "
              f"503 {latency(report, 503)}; cut at {events['cut']:.1f} s, the first second "
              f"with a refusal ended {seconds(first_refusal)} after it; restored at "
              f"{events['restored']:.1f} s, the first second all served ended "
              f"{seconds(back)} after it; {load_average()}")
        log.flush()
        with open(os.path.join(second_data, "serve.log")) as written:
            lines = written.read().splitlines()
        print(f"  the instance logged {len(lines)} lines (HF_LOG=warn); the first three:")
        for line in lines[:3]:
            print(f"    {line[:200]}")
    finally:
        blackhole(address, "del")
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=60)
        relaying.terminate()
        relaying.join()
        shutil.rmtree(second_data, ignore_errors=True)


def full_disk(hf, port):
    """Section 11: a second instance on a file system of its own, filled (see the module
    comment)."""
    mount = tempfile.mkdtemp(prefix="hf-faults-disk-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", mount], check=True)
    os.chmod(mount, 0o755)
    data = os.path.join(mount, "data")
    filler = os.path.join(mount, "filler")
    # The instance's log lives off the full disk, so it can tell what happened.
    log_path = mount + ".log"
    env = dict(os.environ, HF_LISTEN=f"127.0.0.1:{port}", HF_DATA_DIR=data,
               HF_ADMIN_PASSWORD=PASSWORD, HF_LOG="warn")
    env.pop("HF_DATABASE_URL", None)
    base = f"http://127.0.0.1:{port}"

    def call(method, path, body=None, token=None):
        """(status, parsed body) of one request."""
        try:
            with urllib.request.urlopen(api_request(base, method, path, body, token),
                                        timeout=60) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as error:
            return error.code, json.load(error)
        except (urllib.error.URLError, ConnectionError) as error:
            return 0, {"errors": [{"code": type(error).__name__}]}

    def creates(token, label, count, acknowledged):
        answers = {}
        for n in range(count):
            status, body = call("POST", "/data/crm/account", {"name": f"{label} {n}"}, token)
            key = f"{status} {body['errors'][0]['code']}" if status != 201 else "201"
            answers[key] = answers.get(key, 0) + 1
            if status == 201:
                acknowledged.append(body["id"])
        return answers

    def log_lines():
        with open(log_path) as log:
            return sum(1 for _ in log)

    with open(log_path, "w") as log:
        instance = subprocess.Popen([hf, "serve", "--demo"], env=env, stdout=log, stderr=log)
    try:
        for _ in range(1200):
            if call("GET", "/health")[0] == 200:
                break
            time.sleep(0.05)
        token = call("POST", "/auth/login", {"username": "admin", "password": PASSWORD})[1]["token"]
        acknowledged = []
        print(f"  before the fill: {creates(token, 'before', 200, acknowledged)}")
        fill = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        for chunk in (1 << 20, 4096, 1):
            try:
                while os.write(fill, b"\0" * chunk) > 0:
                    pass
            except OSError:
                pass
        os.close(fill)
        print(f"  after the fill: {creates(token, 'full', 300, acknowledged)}; "
              f"{load_average()}")
        psql = ["psql", "-q", "-h", os.path.join(data, "pg", "run"), "-d", "hf",
                "-c", "CHECKPOINT", "-c", "SELECT pg_switch_wal()"]
        if os.geteuid() == 0:
            # The embedded cluster runs as `postgres` when hf runs as root.
            psql = ["runuser", "-u", "postgres", "--", *psql]
        subprocess.run(psql, capture_output=True, check=False)
        print(f"  after the log switch: {creates(token, 'stopped', 20, acknowledged)}")
        before = log_lines()
        time.sleep(20)
        print(f"  {log_lines() - before} log lines in 20 s down; /status: "
              f"{call('GET', '/status')}")
        os.remove(filler)
        room = time.monotonic()
        while call("GET", "/status")[0] != 200 and time.monotonic() - room < 120:
            time.sleep(0.05)
        print(f"  served again {time.monotonic() - room:.2f} s after the file was removed; "
              f"then {creates(token, 'after', 50, acknowledged)}")
        missing = sum(1 for record_id in acknowledged
                      if call("GET", f"/data/crm/account/{record_id}", token=token)[0] != 200)
        print(f"  acknowledged creates {len(acknowledged)}, missing afterwards {missing}")
    finally:
        instance.send_signal(signal.SIGTERM)
        try:
            instance.wait(timeout=60)
        except subprocess.TimeoutExpired:
            instance.kill()
        subprocess.run(["umount", "-l", mount], check=False)
        os.rmdir(mount)
        os.remove(log_path)


def kernel_tcp():
    """The kernel's TCP memory in MB and its orphaned sockets (/proc/net/sockstat)."""
    with open("/proc/net/sockstat") as stats:
        for line in stats:
            if line.startswith("TCP:"):
                fields = line.split()[1:]
                tcp = {fields[i]: int(fields[i + 1]) for i in range(0, len(fields), 2)}
                pages = tcp.get("mem", 0) * os.sysconf("SC_PAGE_SIZE")
                return pages / (1024 * 1024), tcp.get("orphan", 0)
    return 0.0, 0


def slow_readers(port, pid, addresses, per_address, hold):
    """Connections that ask for a large response and never read it (see section 6)."""
    def sample(label):
        memory, orphans = kernel_tcp()
        print(f"  {label}: kernel TCP memory {memory:.1f} MB, "
              f"{orphans} orphaned sockets; service descriptors "
              f"{len(os.listdir(f'/proc/{pid}/fd'))}, RSS {rss_kib(pid)} KiB", flush=True)

    sample("before")
    readers = []
    for address in addresses:
        for _ in range(per_address):
            reader = socket.socket()
            reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            reader.bind((address, 0))
            reader.connect(("127.0.0.1", port))
            reader.sendall(b"GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n")
            readers.append(reader)
    started = time.monotonic()
    print(f"  {len(readers)} requests sent, none read; {load_average()}")
    while time.monotonic() - started < hold:
        time.sleep(5)
        sample(f"{time.monotonic() - started:.0f} s")
    for reader in readers:
        reader.close()
    time.sleep(2)
    sample("2 s after the readers closed")


def pipelined(port, pid):
    """Pipelined requests whose answers are never read (see section 7)."""
    request = b"GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n" * 20000

    def send_without_reading(address, seconds):
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.bind((address, 0))
        client.connect(("127.0.0.1", port))
        client.setblocking(False)
        sent, until = 0, time.monotonic() + seconds
        while sent < len(request) and time.monotonic() < until:
            try:
                sent += client.send(request[sent:sent + 65536])
            except BlockingIOError:
                time.sleep(0.01)
        return client, sent

    before_rss, before_cpu = rss_kib(pid), cpu_seconds(pid)
    started = time.monotonic()
    client, sent = send_without_reading("127.0.4.1", 2)
    time.sleep(10)
    cpu = (cpu_seconds(pid) - before_cpu) / (time.monotonic() - started)
    print(f"  one connection: {sent} bytes of requests taken; the service used {100 * cpu:.0f} % "
          f"of a core over {time.monotonic() - started:.0f} s; RSS {before_rss} -> "
          f"{rss_kib(pid)} KiB; {load_average()}", flush=True)
    client.close()
    time.sleep(1)
    before_rss = rss_kib(pid)
    clients = [send_without_reading(f"127.0.4.{2 + n // 200}", 0.2)[0] for n in range(100)]
    time.sleep(3)
    memory, _orphans = kernel_tcp()
    print(f"  100 connections: RSS {before_rss} -> {rss_kib(pid)} KiB; kernel TCP memory "
          f"{memory:.1f} MB; {load_average()}", flush=True)
    for client in clients:
        client.close()


async def kept_alive_slow_heads(port, pid, addresses, per_address, hold):
    """Connections that trickle the head of their second request (see section 8)."""
    outcomes, taken = {}, []

    async def trickle(address):
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port,
                                                           local_addr=(address, 0))
            writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            await reader.readuntil(b'{"status":"ok"}')
            writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            await writer.drain()
            started = time.monotonic()
            while time.monotonic() - started < hold:
                writer.write(b"X-Slow: v\r\n")
                await writer.drain()
                try:
                    data = await asyncio.wait_for(reader.read(64), 1)
                except asyncio.TimeoutError:
                    continue
                status = int(data.split(b" ")[1]) if data.startswith(b"HTTP/") else "closed"
                outcomes[status] = outcomes.get(status, 0) + 1
                taken.append(time.monotonic() - started)
                writer.close()
                return
            outcomes["held"] = outcomes.get("held", 0) + 1
            writer.close()
        except Exception as error:  # noqa: BLE001
            name = type(error).__name__
            outcomes[name] = outcomes.get(name, 0) + 1

    probe = Probe(port, "/health", local="127.0.0.3")
    await asyncio.sleep(0.5)
    await asyncio.gather(*(trickle(address) for address in addresses
                           for _ in range(per_address)))
    latencies, failures = probe.stop()
    print(f"  answers: {outcomes}; answered {summary(taken)} "
          f"after the head began (held {hold} s at most); {load_average()}")
    print(f"  GET /health from another address during it: {summary(latencies)}; "
          f"failures {counts(failures)}; service descriptors {open_files(pid)} after")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hf", default=os.environ.get("HF_BIN", "target/release/hf"))
    parser.add_argument("--load", default="target/release/hf-load")
    parser.add_argument("--connections", type=int, default=20000)
    parser.add_argument("--port", type=int, default=18095)
    parser.add_argument("--only", default="1,2,3,4,5,6,7,8,9,10,11",
                        help="sections to run, e.g. 1,5")
    parser.add_argument("--overload-seconds", type=int, default=120)
    parser.add_argument("--login-rate", type=int, default=2000,
                        help="logins per second of the open-loop login flood")
    parser.add_argument("--pin", action="store_true",
                        help="the load on the first core, the service on the others")
    args = parser.parse_args()
    sections = {int(n) for n in args.only.split(",")}
    # Each attacking process holds one descriptor per connection of its share, so section 1
    # starts as many as the open-file limit needs; raising the limit is not needed.
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    data = tempfile.mkdtemp(prefix="hf-faults-")
    os.chmod(data, 0o755)
    env = dict(os.environ, HF_LISTEN=f"127.0.0.1:{args.port}", HF_DATA_DIR=data,
               HF_ADMIN_PASSWORD=PASSWORD, HF_LOG="warn")
    env.pop("HF_DATABASE_URL", None)
    log = open(os.path.join(data, "serve.log"), "w")
    command = [args.hf, "serve", "--demo"]
    cores = sorted(os.sched_getaffinity(0))
    # The cores the service and its database have to themselves (none known unless pinned).
    service_cores = 0
    taskset = []
    if args.pin and len(cores) > 1:
        service_cores = len(cores) - 1
        # The service (and the cluster it starts) on every core but the first; this process and
        # every load generator and probe it starts on the first.
        taskset = ["taskset", "-c", ",".join(map(str, cores[1:]))]
        command = [*taskset, *command]
        os.sched_setaffinity(0, {cores[0]})
    service = subprocess.Popen(command, env=env, stdout=log, stderr=log)
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
            with urllib.request.urlopen(api_request(base, method, path, body, token),
                                        timeout=30) as response:
                return json.load(response)

        token = call("POST", "/auth/login", {"username": "admin", "password": PASSWORD})["token"]
        record_id = call("POST", "/data/crm/account", {"name": "bench"}, token)["id"]
        record = f"/data/crm/account/{record_id}"
        pinned = " (pinned: load on core 0, service on the others)" if args.pin else ""
        print(f"hf {args.hf}, {os.cpu_count()} cores{pinned}, open-file limit "
              f"{resource.getrlimit(resource.RLIMIT_NOFILE)[0]}; {load_average()}")

        if 1 in sections:
            print(f"1. {args.connections} slow-body connections from one address")
            asyncio.run(flood(args.port, service.pid, ["127.0.0.2"], args.connections, 40))
        if 2 in sections:
            print("2. 10 000 slow-body connections from 40 addresses (250 each)")
            asyncio.run(flood(args.port, service.pid, [f"127.0.1.{i}" for i in range(1, 41)],
                              250, 40))
        if 3 in sections:
            print("3. login flood")
            login_flood(args.load, args.port, token, record, args.login_rate)
        if 6 in sections:
            print("6. 1 000 slow readers from 4 addresses (250 each)")
            slow_readers(args.port, service.pid, [f"127.0.2.{i}" for i in range(1, 5)], 250, 45)
        if 7 in sections:
            print("7. pipelined requests whose answers are never read")
            pipelined(args.port, service.pid)
        if 8 in sections:
            print("8. 1 000 kept-alive connections trickling their next head from 4 addresses")
            asyncio.run(kept_alive_slow_heads(args.port, service.pid,
                                              [f"127.0.5.{i}" for i in range(1, 5)], 250, 30))
        if 5 in sections:
            print("5. record reads at twice the peak rate")
            overload(args.load, base, token, record, service.pid, args.overload_seconds,
                     service_cores)
        if 9 in sections:
            print("9. a network partition from the database under reads (a second instance)")
            partition(args.hf, args.load, data, args.port, token, record, taskset)
        if 10 in sections:
            print("10. a database that stops answering without refusing anything, under reads "
                  "(a second instance)")
            partition(args.hf, args.load, data, args.port, token, record, taskset, hang=True)
        if 11 in sections:
            print("11. a full disk under a second instance and its embedded PostgreSQL")
            full_disk(args.hf, args.port + 3)
        if 4 in sections:
            print("4. kill -9 of the embedded postmaster under load")
            kill_postmaster(data, call, record, token)
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=60)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
