# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small in-memory AWX API (v2) that the real awx.awx modules can configure, with AWX's own checks.

Only the lowest boundary is faked: configure.yml and the awx.awx modules run unchanged and talk HTTP
to this server. It keeps objects per endpoint, answers the list/detail/association/survey_spec calls
the modules make, and refuses what AWX refuses for this configuration (survey specs and rrules by the
rules of controller_rules.py, unknown references, playbooks missing from the project, extra_data a
template would drop). Every request is recorded.
"""
from __future__ import annotations

import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import controller_rules as awx

TYPES = {
    "organizations": "organization", "inventories": "inventory", "credentials": "credential",
    "execution_environments": "execution_environment", "projects": "project", "job_templates": "job_template",
    "workflow_job_templates": "workflow_job_template", "workflow_job_template_nodes": "workflow_job_template_node",
    "schedules": "schedule", "notification_templates": "notification_template", "labels": "label",
    "instance_groups": "instance_group",
}
# Foreign keys checked on write: field -> endpoint of the object it names.
REFS = {"organization": "organizations", "inventory": "inventories", "project": "projects",
        "execution_environment": "execution_environments", "default_environment": "execution_environments",
        "workflow_job_template": "workflow_job_templates"}


class FakeController:
    def __init__(self, project_root, seed):
        self.project_root = Path(project_root)
        self.objects = {endpoint: {} for endpoint in TYPES}
        self.associations = {}  # (endpoint, id, sub) -> [ids]
        self.surveys = {}  # (endpoint, id) -> spec
        self.requests = []
        self._ids = itertools.count(1)
        for endpoint, items in seed.items():
            for item in items:
                self._create(endpoint, dict(item))

    # --- objects ---------------------------------------------------------------------------------

    def _create(self, endpoint, data):
        oid = next(self._ids)
        url = "/api/v2/%s/%d/" % (endpoint, oid)
        obj = dict(data, id=oid, url=url, type=TYPES[endpoint], summary_fields={}, related={
            "survey_spec": url + "survey_spec/", "update": url + "update/", "copy": url + "copy/",
        })
        if endpoint == "projects":  # creating a project starts its sync, which succeeds here
            obj.update(scm_revision="0" * 40, summary_fields={"current_update": {"id": oid}})
        if endpoint == "workflow_job_template_nodes":
            obj["related"]["unified_job_template"] = "/api/v2/unified_job_templates/%s/" % data.get("unified_job_template")
        self.objects[endpoint][oid] = obj
        return obj

    def named(self, endpoint, name):
        return next(o for o in self.objects[endpoint].values() if o.get("name") == name)

    def survey(self, endpoint, oid):
        return self.surveys.get((endpoint, oid), {})

    def linked(self, endpoint, oid, sub):
        return self.associations.get((endpoint, oid, sub), [])

    def _unified(self):
        for endpoint in ("job_templates", "workflow_job_templates", "projects"):
            yield from self.objects[endpoint].values()

    # --- validation (what AWX answers 400 to) ----------------------------------------------------

    def _errors(self, endpoint, data, current=None):
        merged = dict(current or {}, **data)
        errors = []
        for field, target in REFS.items():
            if merged.get(field) not in (None, "") and int(merged[field]) not in self.objects[target]:
                errors.append("%s %s does not exist" % (field, merged[field]))
        if endpoint == "job_templates":
            for field in ("name", "project", "playbook", "inventory"):
                if not merged.get(field):
                    errors.append("%s is required" % field)
            if merged.get("playbook") and not (self.project_root / merged["playbook"]).is_file():
                errors.append("Playbook not found for project: %s" % merged["playbook"])
        if endpoint == "schedules":
            errors.extend(awx.rrule_errors(merged.get("rrule", "")))
            ujt = next((o for o in self._unified() if o["id"] == merged.get("unified_job_template")), None)
            if ujt is None:
                errors.append("unified_job_template %s does not exist" % merged.get("unified_job_template"))
            elif merged.get("extra_data"):
                survey = self.survey(ujt["type"] + "s", ujt["id"]) if ujt.get("survey_enabled") else {}
                allowed = {q["variable"] for q in survey.get("spec", [])}
                extra = merged["extra_data"] if isinstance(merged["extra_data"], dict) else json.loads(merged["extra_data"])
                dropped = sorted(set(extra) - allowed) if not ujt.get("ask_variables_on_launch") else []
                if dropped:
                    errors.append("Variables %s provided but not allowed on launch" % ", ".join(dropped))
        if endpoint == "workflow_job_template_nodes":
            ujt = next((o for o in self._unified() if o["id"] == merged.get("unified_job_template")), None)
            if ujt is None:
                errors.append("unified_job_template %s does not exist" % merged.get("unified_job_template"))
            elif merged.get("extra_data") and not ujt.get("ask_variables_on_launch"):
                # A node's extra_data are prompts: AWX takes them only where the template asks for variables.
                errors.append("extra_data given but %s does not prompt for variables on launch" % ujt.get("name"))
        return errors

    # --- HTTP --------------------------------------------------------------------------------------

    def handle(self, method, path, query, body):
        self.requests.append((method, path, query, body))
        parts = [p for p in path.split("/") if p][2:]  # drop api, v2
        if parts == ["unified_job_templates"] and method == "GET":
            return 200, self._list(list(self._unified()), query)
        if parts and parts[0] == "project_updates" and method == "GET":
            return 200, {"id": int(parts[1]), "status": "successful", "failed": False, "finished": True,
                         "scm_revision": "0" * 40}
        endpoint = parts[0] if parts else None
        if endpoint not in TYPES:
            return 404, {"detail": "Not found."}
        if len(parts) == 1:
            if method == "GET":
                return 200, self._list(list(self.objects[endpoint].values()), query)
            if method == "POST":
                errors = self._errors(endpoint, body)
                return (400, {"__all__": errors}) if errors else (201, self._create(endpoint, body))
        oid = int(parts[1])
        obj = self.objects[endpoint].get(oid)
        if obj is None:
            return 404, {"detail": "Not found."}
        if len(parts) == 2:
            if method == "GET":
                return 200, obj
            if method == "PATCH":
                errors = self._errors(endpoint, body, obj)
                if errors:
                    return 400, {"__all__": errors}
                obj.update(body)
                return 200, obj
            if method == "DELETE":
                del self.objects[endpoint][oid]
                return 204, None
        sub = parts[2]
        if sub == "survey_spec":
            if method == "GET":
                return 200, self.survey(endpoint, oid)
            errors = awx.spec_errors(body)
            if errors:
                return 400, {"error": "; ".join(errors)}
            self.surveys[(endpoint, oid)] = body
            return 200, {}
        key = (endpoint, oid, sub)
        if method == "GET":
            return 200, self._list([{"id": i} for i in self.associations.get(key, [])], {})
        if method == "POST":
            linked = self.associations.setdefault(key, [])
            if body.get("disassociate"):
                linked.remove(body["id"])
            elif body["id"] not in linked:
                linked.append(body["id"])
            return 204, None
        return 405, {"detail": "Method not allowed."}

    @staticmethod
    def _list(items, query):
        def matches(obj):
            for key, value in query.items():
                if key in ("page_size", "page", "order_by"):
                    continue
                if key.startswith("or__"):
                    continue
                if str(obj.get(key)) != value:
                    return False
            ors = [(k[4:], v) for k, v in query.items() if k.startswith("or__")]
            return not ors or any(str(obj.get(k)) == v for k, v in ors)
        results = [o for o in items if matches(o)]
        return {"count": len(results), "next": None, "previous": None, "results": results}


def serve(controller):
    """Start the fake API on 127.0.0.1 (an ephemeral port); returns (server, base_url)."""

    class Handler(BaseHTTPRequestHandler):
        def _reply(self):
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}") if length else {}
            status, payload = controller.handle(self.command, parts.path, dict(parse_qsl(parts.query)), body)
            data = b"" if payload is None else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("X-API-Product-Name", "AWX")
            self.send_header("X-API-Product-Version", "24.6.1")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = _reply

        def log_message(self, *args):  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, "http://127.0.0.1:%d" % server.server_address[1]
