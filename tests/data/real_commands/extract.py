#!/usr/bin/env python3
"""Extract the bash commands real models sent from agent trajectories already on disk.

Offline by design: it reads bare git mirrors that were fetched beforehand (one directory
per repository, named OWNER+NAME, holding a git dir at OWNER+NAME/repo) with `git show`,
and never touches the network. It writes commands.jsonl: one distinct command per line
with the agent, the model, the source (repo@commit:glob) it came from and, where the
agent named its checkout by an absolute path (OpenHands' /workspace/NAME, SWE-agent's
/OWNER__NAME), that path as "root".

    python3 tests/data/real_commands/extract.py --mirrors DIR [--out FILE]

The SOURCES table below is the list of trajectories read; SOURCES.md describes each one.
"""

import argparse
import fnmatch
import json
import re
import subprocess
import sys
from pathlib import Path

MAX_BYTES = 16 * 1024

# (repo, glob inside the repo, agent, format, model or None to read it from the file)
SOURCES = [
    ("gruckion/mini-swe-agent", "swebench_results/*/trajs/*/*.traj.json",
     "mini-swe-agent", "mini", None),
    ("RussellRyanH/CSCI-635-LiveSWE-Agent", "results/*/*/*/*.traj.json",
     "live-swe-agent", "mini", None),
    ("gsmoon97/swe-agent-eval", "evaluation/python/verified/*/trajs/*/*.json",
     "openhands", "openhands", "claude-3-5-sonnet-20241022"),
    ("SWE-agent/SWE-agent", "*.traj", "swe-agent", "sweagent", None),
]

# SWE-agent's own tool commands (its ACI), which are not bash.
SWEAGENT_TOOLS = {
    "open", "goto", "scroll_up", "scroll_down", "create", "edit", "insert",
    "search_dir", "search_file", "find_file", "submit", "str_replace_editor",
    "filemap", "exit_forfeit", "exit_cost", "exit_context", "exit_error",
    "exit_format", "skip", "debug_start", "debug_stop", "debug_step",
    "debug_continue", "debug_add_breakpoint", "debug_remove_breakpoint",
    "debug_exec", "connect_start", "connect_sendline", "connect_exec",
    "connect_stop", "decompile", "disassemble", "exit", "forfeit", "quit", "set_cursors",
}

SECRET_PATTERNS = [
    re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"\bxox[abpr]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),
    re.compile(r"\beyJ[A-Za-z0-9_\-]{20,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"),
    re.compile(r"(?i)((?:api[_-]?key|token|secret|passwd|password)\s*[=:]\s*['\"]?)"
               r"([A-Za-z0-9_\-/+]{24,})"),
]


def mask(cmd):
    for pat in SECRET_PATTERNS:
        if pat.groups >= 2:
            cmd = pat.sub(lambda m: m.group(1) + "MASKED", cmd)
        else:
            cmd = pat.sub("MASKED", cmd)
    return cmd


def git(gitdir, *args):
    out = subprocess.run(["git", "-C", str(gitdir), *args], capture_output=True, check=True)
    return out.stdout


def files(gitdir, glob):
    names = git(gitdir, "ls-tree", "-r", "--name-only", "HEAD").decode().splitlines()
    return sorted(n for n in names if fnmatch.fnmatch(n, glob) or fnmatch.fnmatch(n, "*/" + glob))


BASH_BLOCK = re.compile(r"```(?:bash|sh|shell|mswea_bash_command)\s*\n(.*?)```", re.S)
OH_CALL = re.compile(r"<function=execute_bash>\s*<parameter=command>\s*(.*?)\s*</parameter>",
                     re.S)


def short_model(name):
    name = (name or "unknown").split("/")[-1]
    return name


def from_mini(doc):
    model = short_model(doc.get("info", {}).get("config", {}).get("model", {}).get("model_name"))
    for msg in doc.get("messages", []):
        if msg.get("role") != "assistant":
            continue
        actions = (msg.get("extra") or {}).get("actions")
        if actions:
            for act in actions:
                if isinstance(act, dict) and act.get("command"):
                    yield model, act["command"]
            continue
        for call in msg.get("tool_calls") or []:
            try:
                args = json.loads(call["function"]["arguments"])
            except (KeyError, TypeError, ValueError):
                continue
            if args.get("command"):
                yield model, args["command"]
        content = msg.get("content")
        if isinstance(content, str):
            blocks = BASH_BLOCK.findall(content)
            # mini-swe-agent runs a turn only when it holds exactly one block.
            if len(blocks) == 1:
                yield model, blocks[0]


OH_ROOT = re.compile(r"/workspace/[A-Za-z0-9_.\-]+")


def openhands_root(doc):
    """The checkout OpenHands ran in: the /workspace/NAME its messages name most."""
    counts = {}
    for msg in doc.get("messages", []):
        text = msg.get("content")
        if isinstance(text, str):
            for m in OH_ROOT.findall(text):
                counts[m] = counts.get(m, 0) + 1
    return max(counts, key=counts.get) if counts else None


def from_openhands(doc, model):
    texts = [m.get("content") for m in doc.get("messages", []) if m.get("role") == "assistant"]
    try:
        texts.append(doc["response"]["choices"][0]["message"]["content"])
    except (KeyError, IndexError, TypeError):
        pass
    for text in texts:
        if isinstance(text, list):
            text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
        if not isinstance(text, str):
            continue
        for cmd in OH_CALL.findall(text):
            if cmd in ("C-c", "C-d", "C-z") or "<parameter=is_input>" in text and cmd == "":
                continue
            yield model, cmd


SWE_ROOT = re.compile(r"\(Current directory: (/[^)\s]+)\)")


def sweagent_root(doc):
    """The checkout SWE-agent ran in: the last `Current directory` the prompt (its history's
    first user message after any demonstration) shows, cut to its first component."""
    found = None
    for msg in doc.get("history", []):
        text = msg.get("content")
        if isinstance(text, str) and msg.get("role") == "user" and not msg.get("is_demo"):
            m = SWE_ROOT.search(text)
            if m:
                found = "/" + m.group(1).strip("/").split("/")[0]
                break
    return found


def from_sweagent(doc, path):
    model = "unknown"
    m = re.search(r"(gpt-?4[a-z0-9\-]*|claude[a-z0-9\-.]*|gpt4o?)", path)
    if m:
        model = m.group(1)
    elif "demonstrations/ctf" in path:
        model = "demonstration-ctf"
    elif "demonstrations" in path:
        model = "demonstration"
    for step in doc.get("trajectory", []):
        action = (step.get("action") or "").strip()
        if not action:
            continue
        first = action.split(None, 1)[0]
        if first in SWEAGENT_TOOLS:
            continue
        yield model, action


def extract(mirrors):
    seen = {}
    counts = {}
    for repo, glob, agent, fmt, model in SOURCES:
        gitdir = Path(mirrors) / repo.replace("/", "+") / "repo"
        if not gitdir.is_dir():
            print(f"skip {repo}: no mirror at {gitdir}", file=sys.stderr)
            continue
        commit = git(gitdir, "rev-parse", "--short=8", "HEAD").decode().strip()
        source = f"{repo}@{commit}:{glob}"
        for path in files(gitdir, glob):
            try:
                doc = json.loads(git(gitdir, "show", f"HEAD:{path}"))
            except (subprocess.CalledProcessError, ValueError):
                continue
            # mini-swe-agent's commands run in the checkout and name it relatively.
            root = None
            if fmt == "mini":
                found = from_mini(doc)
            elif fmt == "openhands":
                found = from_openhands(doc, model)
                root = openhands_root(doc)
            else:
                found = from_sweagent(doc, path)
                root = sweagent_root(doc)
            for mdl, cmd in found:
                cmd = cmd.strip()
                if not cmd or len(cmd.encode()) > MAX_BYTES:
                    continue
                cmd = mask(cmd)
                if cmd in seen:
                    continue
                row = {"cmd": cmd, "agent": agent, "model": mdl, "source": source}
                if root and root != "/":
                    row["root"] = root
                seen[cmd] = row
                key = (repo, agent, mdl)
                counts[key] = counts.get(key, 0) + 1
    return list(seen.values()), counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirrors", required=True, help="directory of OWNER+NAME/repo git dirs")
    ap.add_argument("--out", default=str(Path(__file__).with_name("commands.jsonl")))
    args = ap.parse_args()
    rows, counts = extract(args.mirrors)
    with open(args.out, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    for (repo, agent, model), n in sorted(counts.items()):
        print(f"{n:6d}  {agent:15s} {model:30s} {repo}", file=sys.stderr)
    print(f"{len(rows)} distinct commands -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
