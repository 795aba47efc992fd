"""Shared helpers for the interop scripts: talk to the moto endpoint with the
public API of the installed zae-limiter 0.17 (never its internals' source).

Environment: ZAEL_TEST_DYNAMODB_ENDPOINT (required), AWS credentials and
region default to moto's test values.
"""
import json
import os
import sys

ENDPOINT = os.environ.get("ZAEL_TEST_DYNAMODB_ENDPOINT") or sys.exit(
    "ZAEL_TEST_DYNAMODB_ENDPOINT is not set"
)
REGION = os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_REGION", REGION)
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ["AWS_ENDPOINT_URL"] = ENDPOINT

import boto3  # noqa: E402
from zae_limiter import SyncRepository  # noqa: E402


def client():
    return boto3.client("dynamodb", region_name=REGION, endpoint_url=ENDPOINT)


def create_table(table):
    """The reference's direct create path (docs/storage.md, "Interop") plus TTL."""
    repo = SyncRepository(name=table, region=REGION, endpoint_url=ENDPOINT)
    repo.create_table()
    client().update_time_to_live(
        TableName=table,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"},
    )


def _repo_at(table, cache_ttl):
    """Where open_repo and connect_repo find the repository: the table on moto."""
    return {"stack": table, "region": REGION, "endpoint_url": ENDPOINT, "config_cache_ttl": cache_ttl}


def open_repo(table, namespace="default", cache_ttl=0):
    return SyncRepository.open(namespace, **_repo_at(table, cache_ttl))


def connect_repo(table, namespace="default", cache_ttl=0):
    return SyncRepository.connect(namespace, **_repo_at(table, cache_ttl))


def dump(table):
    """Every item of the table as DynamoDB typed JSON, sorted by (PK, SK)."""
    items = []
    kwargs = {"TableName": table}
    c = client()
    while True:
        page = c.scan(**kwargs)
        items.extend(page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            break
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    items.sort(key=lambda i: (i["PK"]["S"], i["SK"]["S"]))
    return items


def print_json(value):
    json.dump(value, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
