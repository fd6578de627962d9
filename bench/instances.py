#!/usr/bin/env python3
"""Load and propagation measurements for bench/instances.sh (several hf serve processes on one
database). Standard library only; each worker thread keeps one keep-alive connection.

  instances.py writes --token T --root metadata@b --objects o1,o2 --seconds S --concurrency C
               --prefix P URL...
      C threads (thread i talks to URL[i % len(URL)] and writes new integer fields on object
      o[i % len(o)] of module crm) for S seconds; then checks through URL[0] that every
      acknowledged (201) field is there. Prints one JSON line.

  instances.py propagation --token T --root metadata@b --object o --count N WRITER READER
      N times: create a field through WRITER, then ask READER for it until it answers 200; the
      time from WRITER's answer to READER's first 200. Prints one JSON line with percentiles.

wrk cannot say which writes were acknowledged, and "none lost" needs exactly that, hence Python.
"""

import argparse
import http.client
import json
import statistics
import sys
import threading
import time
import urllib.parse


class Connection:
    """One keep-alive HTTP connection that reconnects after a failure."""

    def __init__(self, url, token):
        parsed = urllib.parse.urlsplit(url)
        self.host, self.port = parsed.hostname, parsed.port
        self.headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
        self.conn = None

    def request(self, method, path, body=None):
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
            try:
                data = None if body is None else json.dumps(body)
                self.conn.request(method, path, body=data, headers=self.headers)
                response = self.conn.getresponse()
                payload = response.read()
                return response.status, payload
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt == 1:
                    raise
        raise AssertionError("unreachable")


def field_body(key):
    return {"fieldKind": "scalar", "label": key, "fieldType": "integer"}


def percentile(values, p):
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[index]


def writes(args):
    objects = args.objects.split(",")
    acknowledged = []
    failures = {}
    lock = threading.Lock()
    deadline = time.monotonic() + args.seconds

    def worker(i):
        conn = Connection(args.urls[i % len(args.urls)], args.token)
        obj = objects[i % len(objects)]
        n = 0
        while time.monotonic() < deadline:
            n += 1
            key = f"{args.prefix}_{i}_{n}"
            path = f"/{args.root}/crm/objects/{obj}/fields/{key}"
            try:
                status, payload = conn.request("POST", path, field_body(key))
            except (OSError, http.client.HTTPException) as error:
                status, payload = "no answer", str(error).encode()
            with lock:
                if status == 201:
                    acknowledged.append((obj, key))
                else:
                    code = f"{status}"
                    try:
                        code += " " + json.loads(payload)["errors"][0]["code"]
                    except (ValueError, KeyError, IndexError, TypeError):
                        pass
                    failures[code] = failures.get(code, 0) + 1

    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started

    check = Connection(args.urls[0], args.token)
    present = set()
    for obj in objects:
        status, payload = check.request("GET", f"/{args.root}/crm/objects/{obj}/fields")
        if status != 200:
            sys.exit(f"reading the fields of {obj}: {status} {payload[:300]!r}")
        present.update((obj, f["fieldKey"]) for f in json.loads(payload))
    lost = [key for key in acknowledged if key not in present]
    print(json.dumps({
        "instances": len(args.urls),
        "concurrency": args.concurrency,
        "seconds": round(elapsed, 2),
        "acknowledged": len(acknowledged),
        "writes_per_s": round(len(acknowledged) / elapsed, 1),
        "refused": failures,
        "lost": len(lost),
    }))
    if lost:
        sys.exit(f"acknowledged but lost: {lost[:10]}")


def propagation(args):
    writer = Connection(args.writer, args.token)
    reader = Connection(args.reader, args.token)
    delays = []
    for n in range(args.count):
        key = f"{args.prefix}_{n}"
        path = f"/{args.root}/crm/objects/{args.object}/fields/{key}"
        status, payload = writer.request("POST", path, field_body(key))
        if status != 201:
            sys.exit(f"write {key}: {status} {payload[:300]!r}")
        answered = time.monotonic()
        while True:
            status, _ = reader.request("GET", path)
            if status == 200:
                break
            if time.monotonic() - answered > 30:
                sys.exit(f"{key} was not served by the reader within 30 s")
        delays.append((time.monotonic() - answered) * 1000)
    print(json.dumps({
        "writes": len(delays),
        "p50_ms": round(percentile(delays, 50), 2),
        "p99_ms": round(percentile(delays, 99), 2),
        "max_ms": round(max(delays), 2),
        "mean_ms": round(statistics.mean(delays), 2),
    }))


def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    w = commands.add_parser("writes")
    w.add_argument("--token", required=True)
    w.add_argument("--root", required=True)
    w.add_argument("--objects", required=True)
    w.add_argument("--seconds", type=float, default=10)
    w.add_argument("--concurrency", type=int, default=8)
    w.add_argument("--prefix", required=True)
    w.add_argument("urls", nargs="+")
    p = commands.add_parser("propagation")
    p.add_argument("--token", required=True)
    p.add_argument("--root", required=True)
    p.add_argument("--object", required=True)
    p.add_argument("--count", type=int, default=200)
    p.add_argument("--prefix", required=True)
    p.add_argument("writer")
    p.add_argument("reader")
    args = parser.parse_args()
    {"writes": writes, "propagation": propagation}[args.command](args)


if __name__ == "__main__":
    main()
