"""The Python side of the interop tests: zae-limiter 0.17 used through its
public API (and its provisioner handler called in-process; docs/storage.md, "Interop")
against the moto endpoint in ZAEL_TEST_DYNAMODB_ENDPOINT.

Usage: ref.py COMMAND ARGS... [+ COMMAND ARGS...]
(one JSON document per run: the answer, or a list of answers for several commands)

  create-table TABLE                  the reference's direct create path + TTL
  describe TABLE                      the table layout, normalised for comparison
  dump TABLE                          every item, DynamoDB typed JSON, sorted by key
  nsid TABLE NAMESPACE                the namespace id (connect, read-only)
  provision TABLE ACTION MANIFEST [--full]
                                      provisioner handler plan|apply with a YAML manifest
  resolve TABLE NAMESPACE E/R...      resolve_limits for each pair
  get-limits TABLE NAMESPACE E R      get_limits (entity level as stored) with its flags
  get-entity-level TABLE NAMESPACE E R   limits plus disabled/cascade of one entity level
  get-resource-defaults TABLE NAMESPACE R
  get-system-defaults TABLE NAMESPACE
  set-fixture TABLE NAMESPACE         write the fixture levels with the client API
  set-unmanaged TABLE NAMESPACE       resource defaults for "legacy" (a level no manifest manages)
  acquire TABLE NAMESPACE E R LIMIT N try to consume N of LIMIT; prints {"admitted": bool}
  purge TABLE NAMESPACE               delete the namespace, then purge its items (GSI4)
  serve TABLE NAMESPACE               a long-lived limiter (config cache 60 s): reads
                                      "E R LIMIT N" lines, answers {"admitted": bool} each
"""
import datetime
import json
import sys

import zl


def limit_json(limit):
    def entry(e):
        return {
            "cron": e.cron,
            "tz": e.tz,
            "scale": e.scale,
            "capacity": e.capacity,
            "refill_amount": e.refill_amount,
            "refill_period_seconds": e.refill_period_seconds,
        }

    return {
        "name": limit.name,
        "capacity": limit.capacity,
        "refill_amount": limit.refill_amount,
        "refill_period_seconds": limit.refill_period_seconds,
        "schedule": [entry(e) for e in limit.schedule],
        "reset_schedule": [{"cron": e.cron, "tz": e.tz} for e in limit.reset_schedule],
        "reset_after_seconds": (
            int(limit.reset_after.total_seconds()) if limit.reset_after is not None else None
        ),
        "soft": bool(limit.soft),
    }


def flags(found, ns):
    """resolve_limits' flag reads, keyed by item key with the namespace id elided."""
    return sorted(["|".join(k).replace(ns, "{ns}"), v] for k, v in found.items())


def describe(table):
    t = zl.client().describe_table(TableName=table)["Table"]
    ttl = zl.client().describe_time_to_live(TableName=table)["TimeToLiveDescription"]

    def index(i):
        return {
            "name": i["IndexName"],
            "keys": [(k["AttributeName"], k["KeyType"]) for k in i["KeySchema"]],
            "projection": i["Projection"]["ProjectionType"],
        }

    return {
        "keys": [(k["AttributeName"], k["KeyType"]) for k in t["KeySchema"]],
        "attributes": sorted(
            (a["AttributeName"], a["AttributeType"]) for a in t["AttributeDefinitions"]
        ),
        "gsi": sorted((index(i) for i in t.get("GlobalSecondaryIndexes", [])), key=lambda i: i["name"]),
        "lsi": sorted((index(i) for i in t.get("LocalSecondaryIndexes", [])), key=lambda i: i["name"]),
        "stream": t.get("StreamSpecification"),
        "billing": t.get("BillingModeSummary", {}).get("BillingMode"),
        "ttl": [ttl.get("TimeToLiveStatus"), ttl.get("AttributeName")],
    }


def provision(table, action, manifest_path, full):
    import yaml
    from zae_limiter_provisioner.handler import on_event

    with open(manifest_path) as f:
        manifest = yaml.safe_load(f)
    ns = manifest.get("namespace", "default")
    repo = zl.open_repo(table, ns)
    event = {
        "action": action,
        "table_name": table,
        "namespace_id": repo.namespace_id,
        "manifest": manifest,
    }
    if full:
        event["full"] = True
    return on_event(event, None)


def set_fixture(table, namespace):
    """Levels with schedules, quotas, session quotas, soft limits and bypass."""
    from zae_limiter import Limit, ScheduleEntry

    repo = zl.open_repo(table, namespace)
    repo.set_system_defaults(
        [Limit.per_minute("rpm", 1000), Limit.per_minute("tpm", 100000)],
        on_unavailable="allow",
    )
    repo.set_resource_defaults(
        "gpt-4",
        [
            Limit(
                name="rpm",
                capacity=600,
                refill_amount=500,
                refill_period_seconds=60,
                schedule=(
                    ScheduleEntry(cron="* 9-17 * * MON-FRI", tz="America/New_York", scale=0.5),
                    ScheduleEntry(cron="* 0-6 * * *", tz="America/New_York", capacity=100, refill_amount=50),
                ),
            ),
            Limit.quota("rpd", 10000, cron="0 0 * * *", tz="America/New_York"),
        ],
    )
    repo.set_resource_defaults(
        "claude-3", [Limit.per_minute("rpm", 200)], disabled="bypass"
    )
    repo.set_limits(
        "user-1",
        [
            Limit.per_minute("rpm", 60),
            Limit.per_minute("tpm", 20000, soft=True),
            Limit.quota("session", 2000, reset_after=datetime.timedelta(hours=5)),
        ],
        resource="gpt-4",
    )
    repo.set_limits("user-1", [Limit.per_hour("rph", 3000)])
    repo.set_limits(
        "user-2",
        [Limit.quota("monthly", 1000000, cron="0 0 1 * *", tz="Europe/Berlin")],
        resource="claude-3",
        cascade=True,
    )
    return {"namespace_id": repo.namespace_id}


def main(argv):
    cmd, args = argv[0], argv[1:]
    if cmd == "create-table":
        zl.create_table(args[0])
        zl.open_repo(args[0])
        return {"ok": True}
    if cmd == "describe":
        return describe(args[0])
    if cmd == "dump":
        return zl.dump(args[0])
    if cmd == "nsid":
        return {"namespace_id": zl.connect_repo(args[0], args[1]).namespace_id}
    if cmd == "provision":
        return provision(args[0], args[1], args[2], "--full" in args[3:])
    if cmd == "resolve":
        repo = zl.connect_repo(args[0], args[1])
        out = {}
        for pair in args[2:]:
            e, r = pair.split("/", 1)
            disabled, cascade = {}, {}
            limits, on_unavailable, source = repo.resolve_limits(e, r, disabled, cascade)
            out[pair] = {
                "limits": sorted((limit_json(l) for l in limits or []), key=lambda l: l["name"]),
                "on_unavailable": on_unavailable,
                "source": source,
                "disabled": flags(disabled, repo.namespace_id),
                "cascade": flags(cascade, repo.namespace_id),
            }
        return out
    if cmd == "get-limits":
        repo = zl.connect_repo(args[0], args[1])
        limits = repo.get_limits(args[2], args[3])
        return sorted((limit_json(l) for l in limits), key=lambda l: l["name"])
    if cmd == "get-entity-level":
        repo = zl.connect_repo(args[0], args[1])
        e, r = args[2], args[3]
        return {
            "limits": sorted((limit_json(l) for l in repo.get_limits(e, r)), key=lambda l: l["name"]),
            "disabled": repo.get_entity_disabled(e, r),
            "cascade": repo.get_entity_cascade(e, r),
        }
    if cmd == "get-resource-defaults":
        repo = zl.connect_repo(args[0], args[1])
        r = args[2]
        return {
            "limits": sorted((limit_json(l) for l in repo.get_resource_defaults(r)), key=lambda l: l["name"]),
            "disabled": repo.get_resource_disabled(r),
            "cascade": repo.get_resource_cascade(r),
        }
    if cmd == "get-system-defaults":
        repo = zl.connect_repo(args[0], args[1])
        limits, on_unavailable = repo.get_system_defaults()
        return {
            "limits": sorted((limit_json(l) for l in limits), key=lambda l: l["name"]),
            "on_unavailable": on_unavailable,
        }
    if cmd == "set-unmanaged":
        from zae_limiter import Limit

        repo = zl.open_repo(args[0], args[1])
        repo.set_resource_defaults("legacy", [Limit.per_minute("rpm", 42)])
        return {"ok": True}
    if cmd == "set-fixture":
        return set_fixture(args[0], args[1])
    if cmd == "acquire":
        from zae_limiter import RateLimitExceeded, SyncRateLimiter

        table, namespace, e, r, name, n = args
        repo = zl.connect_repo(table, namespace)
        limiter = SyncRateLimiter(repository=repo)
        try:
            with limiter.acquire(e, r, {name: int(n)}):
                pass
            return {"admitted": True}
        except RateLimitExceeded:
            return {"admitted": False}
    if cmd == "purge":
        repo = zl.connect_repo(args[0], args[1])
        namespace_id = repo.namespace_id
        repo.delete_namespace(args[1])
        repo.purge_namespace(namespace_id)
        return {"purged": namespace_id}
    if cmd == "serve":
        from zae_limiter import RateLimitExceeded, SyncRateLimiter

        repo = zl.connect_repo(args[0], args[1], cache_ttl=60)
        limiter = SyncRateLimiter(repository=repo)
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            e, r, name, n = line.split()
            try:
                with limiter.acquire(e, r, {name: int(n)}):
                    pass
                print(json.dumps({"admitted": True}), flush=True)
            except RateLimitExceeded:
                print(json.dumps({"admitted": False}), flush=True)
        return {"done": True}
    sys.exit(f"unknown command {cmd!r}\n{__doc__}")


if __name__ == "__main__":
    # Several commands in one interpreter (imports cost seconds): CMD ARGS + CMD ARGS …
    commands, current = [], []
    for arg in sys.argv[1:]:
        if arg == "+":
            commands.append(current)
            current = []
        else:
            current.append(arg)
    commands.append(current)
    results = [main(c) for c in commands]
    zl.print_json(results[0] if len(results) == 1 else results)
