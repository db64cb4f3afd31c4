# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout policy of a fleet: the capacity guard before each batch, and the outcome after the run.

Controller-only (the ``fleet_*`` filters, playbooks/tasks/capacity_guard.yml, playbooks/fleet_outcome.yml;
docs/fleet.md explains the rules). The playbooks only probe and end the play; every count, limit and
message is made here.

- ``guard_plan(hostvars, hosts, batch, ...)``: before probing. The limits (``N%`` read once, as Ansible
  reads ``serial``), the drained hosts, which host of the batch probes which hosts, what to probe on each
  (from the server role's checked settings when the role ran there in this run), and whether the first
  batch is the one ``specdec_serial`` asks for.
- ``guard(plan, hostvars, alive)``: after probing. Who is out of service and why, the hosts tried in
  earlier batches and the ones that failed, whether this batch is refused (and why), each batch host's
  state, the line the job log shows.
- ``outcome(hostvars, hosts)``: after the report. One line for each host without a verdict, and the
  message of each host to fail.

``hostvars`` is any mapping of host name to that host's variables (Ansible's ``hostvars``, or plain
dicts in tests). Only the variables named in this file are read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ansible_collections.llmops.specdec.plugins.module_utils import _engine, _gate, _secrets, _server, _verdict_explain

__all__ = ["FleetError", "count", "probe_target", "guard_plan", "guard", "outcome", "services", "DRAINED", "SERVER_DEFAULTS"]

DRAINED = "drained in inventory (specdec_in_service: false)"
# roles/spec_server/defaults/main.yml, for a host the role has not checked yet in this run: another
# host's hostvars carry its inventory, not the role's defaults. tests/unit/.../test__fleet.py holds
# these to that file; the probe address rule itself is _server's.
SERVER_DEFAULTS = {"engine": _engine.DEFAULT, "host": "127.0.0.1",
                   "port": dict((name, mod.DEFAULT_PORT) for name, mod in _engine.ENGINES.items()),
                   "unit": "%s-server.service"}
_JOURNAL_HINT = re.compile(r";? see journalctl.*$")
_TRUE = ("1", "true", "yes", "on", "y", "t")
_FALSE = ("0", "false", "no", "off", "n", "f")


class FleetError(ValueError):
    """A rollout policy value that cannot be read; the message names the variable."""


def _unset(value):
    return value is None or value == ""


def _bool(name, value, default):
    if _unset(value):
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise FleetError("%s must be a boolean, got %r" % (name, value))


def count(name, value, hosts, minimum=0):
    """Hosts meant by ``value`` among ``hosts``: an int, or ``N%`` read as Ansible reads ``serial``.

    As ``ansible.utils.helpers.pct_to_int``: ``N%`` is ``int(N / 100.0 * hosts)`` (rounded down), or
    ``minimum`` when that is 0; an int is taken as it is.
    """
    if isinstance(value, bool):
        raise FleetError("%s must be a number of hosts or N%%, got %r" % (name, value))
    text = str(value).strip()
    try:
        if text.endswith("%"):
            return int((float(text[:-1]) / 100.0) * hosts) or minimum
        return int(text)
    except ValueError:
        raise FleetError("%s must be a number of hosts or N%%, got %r" % (name, value)) from None


def _percentage(name, value):
    if _unset(value):
        return 100.0
    try:
        return float(str(value).strip().rstrip("%"))
    except ValueError:
        raise FleetError("%s must be a percentage, got %r" % (name, value)) from None


def _lists_model(engine):
    """Whether the engine's readiness checks the served model (its adapter's READY_LISTS_MODEL)."""
    return _engine.known(engine) and _engine.get(engine).READY_LISTS_MODEL


def probe_target(hv):
    """What the capacity guard probes on a host: ``{url, engine, unit, model}`` (model None: not checked).

    The server role's checked settings (``spec_server_checked``, tasks/render.yml) when it ran on the host
    in this run; otherwise the host's inventory over the role's defaults, with _server's address rule.
    """
    checked = hv.get("spec_server_checked")
    if isinstance(checked, Mapping) and checked.get("ready_url"):
        engine = checked["engine"]
        return {
            "url": checked["ready_url"],
            "engine": engine,
            "unit": checked["unit"],
            "model": (checked.get("model_name") or None) if _lists_model(engine) else None,
        }
    engine = hv.get("spec_server_engine") or SERVER_DEFAULTS["engine"]
    port = hv.get("spec_server_port")
    if _unset(port):
        port = SERVER_DEFAULTS["port"].get(engine, SERVER_DEFAULTS["port"][_engine.DEFAULT])
    host = hv.get("spec_server_host")
    if host is None:
        host = SERVER_DEFAULTS["host"]
    url = _server.ready_url(host, port, hv.get("spec_server_ready_url") or "")
    model = (hv.get("spec_server_served_model_name") or hv.get("spec_server_model") or None) if _lists_model(engine) else None
    return {"url": url, "engine": engine, "unit": hv.get("spec_server_unit") or SERVER_DEFAULTS["unit"] % engine, "model": model}


def check_probe_inputs(host, hv):
    """The values the probe itself sends, judged as the server role's gate judges them, before any probe:
    a hostile port or key is refused naming its field, not reported as a service that does not answer."""
    port = hv.get("spec_server_port")
    if not _unset(port):
        try:
            _gate.integer("spec_server_port", port, 1, 65535)
        except _gate.GateError as exc:
            raise FleetError("%s: %s" % (host, exc)) from None
    key = hv.get("spec_server_api_key")
    problem = _secrets.api_key_problem(key) if isinstance(key, str) else None
    if problem:
        raise FleetError("%s: spec_server_%s" % (host, problem))


def _first_serial(serial):
    if isinstance(serial, (list, tuple)):
        serial = serial[0] if serial else None
    return "100%" if _unset(serial) else serial


def guard_plan(hostvars, hosts, batch, max_out_of_service=None, max_fail_percentage=None, max_failed_hosts=None, serial=None):
    """Before probing: limits, drained hosts, who probes whom, what to probe, the serial check.

    ``hosts`` is the play's hosts (``ansible_play_hosts_all``), ``batch`` this batch
    (``ansible_play_batch``); the rest are the ``specdec_*`` policy variables (None or "" when unset).
    """
    hosts, batch = list(hosts), list(batch)
    service = services(hostvars, hosts)
    # A serving group is one service (docs/group.md): it counts once, and its head's probe is the group's.
    n = len(set(service.values()))
    policy = {
        "max_out_of_service": "100%" if _unset(max_out_of_service) else max_out_of_service,
        "max_fail_percentage": max_fail_percentage,
        "max_failed_hosts": None if _unset(max_failed_hosts) else max_failed_hosts,
        "serial": "100%" if _unset(serial) else serial,
    }
    serial_n = count("specdec_serial", _first_serial(policy["serial"]), len(hosts), minimum=1)  # Ansible's, by host
    limits = {
        "max_out": max(count("specdec_max_out_of_service", policy["max_out_of_service"], n, minimum=1), 1),
        "max_failed": None if policy["max_failed_hosts"] is None else count("specdec_max_failed_hosts", policy["max_failed_hosts"], len(hosts)),
        "max_fail_pct": _percentage("specdec_max_fail_percentage", max_fail_percentage),
        "first_batch": batch[:1] == hosts[:1],
        # Ansible's first batch (playbook_executor._get_serialized_batches): 0 or less means every host.
        "expected_batch": len(hosts) if serial_n <= 0 else min(serial_n, len(hosts)),
    }
    drained, probes = [], {}
    for host in hosts:
        hv = hostvars[host]
        if not _bool("specdec_in_service of %s" % host, hv.get("specdec_in_service"), True):
            drained.append(host)
    # A group with one node drained is drained whole: it cannot serve without it.
    drained = [h for h in hosts if service[h] in {service[d] for d in drained}]
    for host in hosts:
        if host not in drained and service[host] == host:
            check_probe_inputs(host, hostvars[host])
            probes[host] = probe_target(hostvars[host])
    probed = list(probes)
    # Host k of a batch of b probes hosts k, k+b, k+2b...: the batch probes the fleet in about N/b round trips.
    share = {host: probed[k :: len(batch)] for k, host in enumerate(batch)}
    serial_problem = ""
    if limits["first_batch"] and len(batch) != limits["expected_batch"]:
        serial_problem = (
            "the first batch has %d host(s) but specdec_serial=%s asks for %d: Ansible evaluates serial before any host is "
            "chosen, so it sees extra vars only. Pass specdec_serial with -e (or in the AWX job template's extra vars), "
            "not in inventory. Nothing was changed." % (len(batch), policy["serial"], limits["expected_batch"])
        )
    return {
        "hosts": hosts,
        "batch": batch,
        "policy": policy,
        "limits": limits,
        "drained": drained,
        "probes": probes,
        "share": share,
        "serial_problem": serial_problem,
        "service": service,
    }


def services(hostvars, hosts):
    """Each host's service: its serving group's head for a node of a group (``spec_server_nodes``, the head first,
    when the head is in the play), else the host itself."""
    out = {}
    for host in hosts:
        nodes = hostvars[host].get("spec_server_nodes") or []
        nodes = list(nodes) if isinstance(nodes, (list, tuple)) else []
        out[host] = nodes[0] if host in nodes and nodes[0] in hosts else host
    return out


def _why_down(probe):
    if probe.get("unreachable"):
        return "unreachable: " + str(probe.get("msg") or "").strip()
    if probe.get("ready"):
        return None
    return _JOURNAL_HINT.sub("", str(probe.get("msg", "not ready")))


def _failed_hosts(hosts, hostvars, batch, alive):
    """Hosts switched in an earlier batch of this run, and of those the ones that failed.

    Failed: removed from the play (failed outright), or its candidate failed (recorded; the host is
    failed after the report by fleet_outcome.yml).
    """
    tried, failed = [], []
    records = {}
    for host in hosts:
        hv = hostvars[host]
        if hv.get("specdec_fleet_state") == "switching" and host not in batch:
            tried.append(host)
            records[host] = hv.get("spec_switch_record")
    failed = [h for h in tried if h not in alive]
    failed += [h for h in tried if h not in failed and isinstance(records[h], Mapping) and records[h].get("outcome") == "failed"]
    return tried, failed


def guard(plan, hostvars, alive):
    """After probing: who is out, the failure budget, the refusal, each batch host's state and reason.

    The probe results are the ``specdec_guard_probe`` of each batch host (its share of the fleet);
    ``alive`` is ``ansible_play_hosts`` (hosts not failed so far).
    """
    hosts, batch, limits, policy = plan["hosts"], plan["batch"], plan["limits"], plan["policy"]
    why = {host: DRAINED for host in plan["drained"]}
    for host in batch:
        for probe in (hostvars[host].get("specdec_guard_probe") or {}).get("results") or []:
            reason = _why_down(probe)
            if reason is not None:
                why[probe["item"]] = reason
    service = plan.get("service") or {host: host for host in hosts}
    for host in hosts:
        head = service[host]
        if host not in why and head in why:
            why[host] = "its serving group's head %s: %s" % (head, why[head])
    down = {host: why[host] for host in hosts if host in why}
    switch = [host for host in batch if host not in down]
    out = len({service[host] for host in list(down) + switch})
    n = len(set(service.values()))
    unit = "hosts" if n == len(hosts) else "services (a serving group counts once)"
    tried, failed = _failed_hosts(hosts, hostvars, batch, set(alive))
    refused = ""
    if out > limits["max_out"]:
        refused = "switching %s now would leave %d of %d %s out of service, more than specdec_max_out_of_service=%s (%d %s); out of service: %s" % (
            ", ".join(switch) or "no host",
            out,
            n,
            unit,
            policy["max_out_of_service"],
            limits["max_out"],
            unit.split(" ", maxsplit=1)[0],
            "; ".join("%s: %s" % kv for kv in down.items()) or "none",
        )
    elif (tried and len(failed) * 100.0 / len(tried) > limits["max_fail_pct"]) or (limits["max_failed"] is not None and len(failed) > limits["max_failed"]):
        refused = "failure budget spent: %d of %d host(s) tried so far failed (%s), over specdec_max_fail_percentage=%s or specdec_max_failed_hosts=%s" % (
            len(failed),
            len(tried),
            ", ".join(failed),
            limits["max_fail_pct"],
            limits["max_failed"],
        )
    states, reasons = {}, {}
    for host in batch:
        if host in down:
            states[host], reasons[host] = "skipped", "out of service before its batch: " + down[host]
        elif refused:
            states[host], reasons[host] = "refused", "rollout stopped before this batch: " + refused
        else:
            states[host], reasons[host] = "switching", ""
    summary = "batch %s: %d to switch, %d out of service%s, %d out at once of %d (limit %d), %d of %d tried so far failed" % (
        ",".join(batch),
        len(switch),
        len(down),
        " (%s)" % ", ".join(down) if down else "",
        out,
        n,
        limits["max_out"],
        len(failed),
        len(tried),
    )
    lines = [summary]
    if refused:
        lines.append("capacity guard: %s. This batch and the ones after it are not touched." % refused)
    return {
        "down": down,
        "batch": switch,
        "out": out,
        "tried": tried,
        "failed": failed,
        "limits": limits,
        "refused": refused,
        "states": states,
        "reasons": reasons,
        "lines": lines,
    }


def outcome(hostvars, hosts):
    """After the report: ``{lines: {host: line}, fail: {host: message}}`` over the play's hosts.

    ``lines`` names every host without a verdict (skipped, refused, not reached, failed before a verdict).
    ``fail`` holds the hosts that did not end as asked: a candidate that failed (unless the host's
    ``spec_switch_fail_on_candidate_error`` is false), and every host without a verdict except those
    drained in inventory or not asked (another engine than the request's).
    """
    views = {host: hostvars[host] for host in hosts}
    # What the capacity guard saw when it stopped the rollout (every host of that batch holds it).
    stopped = [hv.get("specdec_guard") for hv in views.values() if isinstance(hv.get("specdec_guard"), Mapping)]
    down = next((g.get("down") or {} for g in stopped if g.get("refused")), {})
    lines, fail = {}, {}
    for host, hv in views.items():
        record = hv.get("spec_switch_record")
        if record is not None:
            if record.get("outcome") == "failed" and _bool("spec_switch_fail_on_candidate_error", hv.get("spec_switch_fail_on_candidate_error"), True):
                fail[host] = hv.get("spec_switch_verdict_line") or _verdict_explain.verdict_line(record)
            continue
        state = hv.get("specdec_fleet_state") or "not reached"
        given = reason = hv.get("specdec_fleet_reason") or ""
        if not reason:
            if state == "switching":
                reason = "failed before a verdict was recorded, see its error above"
            else:
                reason = "the rollout stopped before its batch" + (", and it was out of service: " + down[host] if host in down else "")
        lines[host] = "%s: %s - %s" % (host, state.upper().replace("_", " "), reason)
        # Skipped as drained (its batch was reached) or not asked: what the operator wanted.
        if DRAINED not in given and not _bool("specdec_not_asked", hv.get("specdec_not_asked"), False):
            fail[host] = lines[host]
    return {"lines": lines, "fail": fail}
