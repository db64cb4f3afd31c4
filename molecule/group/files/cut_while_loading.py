# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cut the link between a serving group's nodes while its candidate loads, heal it once the rollback began.

Runs on the controller. Starts `ansible-playbook playbooks/switch_spec.yml --limit GROUP`, watches the head's unit
file: once it is the candidate's, cuts the link between the nodes (tests/mockgpu/host/link cut: packets between the
peers dropped, no reset, each node's link to the controller kept), so the workers cannot join the head's rendezvous;
once the head's unit file is the previous one again (the rollback began), heals it, so the restored group can meet.
Prints one JSON document: whether the cut landed while the candidate was installed, when it was cut and healed, the
playbook's rc, and each node's state before and at the end (kill_confirm.py's probe).

Usage: cut_while_loading.py --inventory INV --limit GROUP --unit UNIT --port PORT --key KEY --link TOOL
                            --node NAME=ADDRESS [--node ...] (the head first) [--extra JSON] [--log FILE] [--timeout S]
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kill_confirm import parse_args, probe  # noqa: E402  the options; one probe of a node (unit SHA-256, guard, history, /health)


def link(tool, action, names):
    subprocess.run([tool, action] + names, check=True, capture_output=True, timeout=30)
    return time.time()


def wait_for(args, address, done, timeout, play=None):
    """Probe the node until ``done(probe)`` (its probe), the playbook ended (``play``), or ``timeout``."""
    start = time.time()
    while time.time() - start < timeout:
        seen = probe(args, address)
        if "error" not in seen and done(seen):
            return seen
        if play is not None and play.poll() is not None:
            return None
        time.sleep(0.3)
    return None


def main():
    args, nodes = parse_args("--link")
    names = [node[0] for node in nodes]
    head = nodes[0][1]
    root = os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.getcwd())
    out = {"reached": False, "before": {name: probe(args, address) for name, address in nodes}}
    base = out["before"][names[0]]["sha"]
    with open(args.log, "w") as log:
        play = subprocess.Popen(
            [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", args.inventory, "--limit",
             args.limit, "playbooks/switch_spec.yml", "-e", args.extra],
            cwd=root, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        installed = wait_for(args, head, lambda p: p["sha"] != base, args.timeout, play)
        if installed is not None:
            out["cut_at"] = link(args.link, "cut", names)
            out["reached"] = True
            out["at_cut"] = installed
            back = wait_for(args, head, lambda p: p["sha"] == base, args.timeout, play)
            out["rollback_seen"] = back is not None
    finally:
        out["healed_at"] = link(args.link, "heal", names)
    try:
        out["rc"] = play.wait(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        play.kill()
        out["rc"] = play.wait()
    # The restored group meets again once healed: the head answers.
    wait_for(args, head, lambda p: p["health"] == 200, 90)
    out["end"] = {name: probe(args, address) for name, address in nodes}
    out["cut_s"] = round(out["healed_at"] - out["cut_at"], 1) if out.get("cut_at") else None
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
