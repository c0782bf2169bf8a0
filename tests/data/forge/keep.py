#!/usr/bin/env python3
"""Keeps, from a forge's published OpenAPI 3 description (JSON), the operations harness calls
and everything they refer to, unchanged: the operations as published (only keys named in
--drop are removed, e.g. a packager's own extension), and the transitive closure of their
`$ref`s (parameters, schemas, responses, headers, examples). Writes the kept description,
indented as the published file is.

  keep.py SOURCE.json OUT.json --op pulls/list --op pulls/create ... [--drop x-octokit]
"""
import argparse
import json


def drop(value, keys):
    if isinstance(value, dict):
        return {k: drop(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [drop(v, keys) for v in value]
    return value


def refs(value, found):
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "$ref" and isinstance(v, str):
                found.add(v)
            else:
                refs(v, found)
    elif isinstance(value, list):
        for v in value:
            refs(v, found)


def pointer(doc, ref):
    node = doc
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def keep(doc, op_ids):
    paths, missing = {}, set(op_ids)
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            if isinstance(op, dict) and op.get("operationId") in op_ids:
                paths.setdefault(path, {})[method] = op
                missing.discard(op["operationId"])
    if missing:
        raise SystemExit(f"not in the description: {sorted(missing)}")
    todo, seen = set(), set()
    refs(paths, todo)
    while todo:
        ref = todo.pop()
        if ref in seen:
            continue
        if not ref.startswith("#/components/"):
            raise SystemExit(f"a $ref outside components: {ref}")
        seen.add(ref)
        refs(pointer(doc, ref), todo)
    components = {}
    for ref in sorted(seen):
        _, _, kind, name = ref.split("/", 3)
        components.setdefault(kind, {})[name] = pointer(doc, ref)
    kept = {k: doc[k] for k in ("openapi", "info", "servers") if k in doc}
    kept["paths"] = paths
    kept["components"] = components
    return kept


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("source")
    ap.add_argument("out")
    ap.add_argument("--op", action="append", required=True)
    ap.add_argument("--drop", action="append", default=[])
    args = ap.parse_args()
    with open(args.source, encoding="utf-8") as f:
        doc = drop(json.load(f), set(args.drop))
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(keep(doc, set(args.op)), f, indent=2, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
