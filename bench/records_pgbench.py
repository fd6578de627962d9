"""Writes the pgbench scripts of bench/records.sh: the exact statements the service sends for
`GET /data/crm/opportunity/{id}` and `POST /data/crm/opportunity`, taken from the records plan
snapshot, with the request's values in place of the parameters.

Usage: records_pgbench.py ROLE SUB OPPORTUNITY_ID ACCOUNT_ID OUT_DIR

Each script comes in three forms: `<name>.sql` sends one statement per round trip,
`<name>_pipelined.sql` sends the transaction in one round trip as the service does, and
`<name>_request.sql` adds what every authenticated request also sends: the look-up of the token's
principal, then the pipelined transaction.
"""

import re
import sys
from pathlib import Path

SNAPSHOT = Path(__file__).resolve().parent.parent / (
    "crates/hf-storage/src/records/snapshots/hf_storage__records__plan__tests__opportunity.snap"
)


def statements():
    """name -> (sql, literal values) of every statement in the snapshot."""
    found = {}
    lines = SNAPSHOT.read_text().splitlines()
    for i, line in enumerate(lines):
        match = re.match(r"^(\w+) \(own (\d+), literals \[(.*)\]\):$", line)
        if match:
            literals = re.findall(r'Some\("((?:[^"\\]|\\.)*)"\)|None', match.group(3))
            found[match.group(1)] = (lines[i + 1], int(match.group(2)), literals)
    return found


def quote(value):
    return "NULL" if value is None else "'" + value.replace("'", "''") + "'"


def bind(sql, values):
    """Replaces $n by the n-th value, longest numbers first so $1 does not eat $12."""
    for number in sorted(values, reverse=True):
        sql = sql.replace(f"${number}", values[number])
    return sql


def main():
    role, sub, opportunity, account, out = sys.argv[1:6]
    out = Path(out)
    found = statements()
    setup = (
        f"SELECT set_config('role', {quote(role)}, true), "
        "set_config('statement_timeout', '{ms}ms', true), set_config('TimeZone', 'UTC', true);"
    )

    sql, own, literals = found["read_own"]
    values = {1: quote(opportunity)}
    values.update({own + 1 + i: quote(v) for i, v in enumerate(literals)})
    read = [
        "BEGIN READ ONLY;",
        setup.replace("{ms}", "5000"),
        bind(sql, values) + ";",
        "COMMIT;",
    ]

    new_id = "(md5(:n::text || '-' || :client_id::text)::uuid)"
    sql, own, literals = found["create"]
    columns = [account, "1200.50", "2024-12-31", "Deal", "40", "open"]
    values = {
        1: new_id,
        2: quote("{" + ",".join("t" for _ in columns) + "}"),
        3: quote("true"),
        4: "NULL",
        5: quote("[null,null,null,null]"),
        6: quote("{f,f,f,f}"),
    }
    values.update({7 + i: quote(v) for i, v in enumerate(columns)})
    values.update({own + 1 + i: quote(v) for i, v in enumerate(literals)})
    create_sql = bind(sql, values)
    read_sql, own, literals = found["read_own"]
    values = {1: new_id}
    values.update({own + 1 + i: quote(v) for i, v in enumerate(literals)})
    create = [
        "BEGIN;",
        setup.replace("{ms}", "15000"),
        create_sql + ";",
        bind(read_sql, values) + ";",
        "COMMIT;",
    ]

    for name, script in [("read", read), ("create", create)]:
        head = ["\\set n random(1, 1000000000000)"] if name == "create" else []
        (out / f"{name}.sql").write_text("\n".join(head + script) + "\n")
        piped = ["\\startpipeline"] + script + ["\\endpipeline"]
        (out / f"{name}_pipelined.sql").write_text("\n".join(head + piped) + "\n")
        lookup = (
            "SELECT id, name, sub, is_admin, created_at FROM hf.principals "
            f"WHERE sub = {quote(sub)};"
        )
        (out / f"{name}_request.sql").write_text("\n".join(head + [lookup] + piped) + "\n")


main()
