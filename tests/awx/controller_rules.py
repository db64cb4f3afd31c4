# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What AWX checks and does with surveys and schedules, written down so tests can apply it offline.

Follows AWX 24's API: the survey spec validation of a job template's survey_spec endpoint, the
per-answer validation and default handling at launch (SurveyJobTemplateMixin), and the rrule checks
of the schedule serializer. Only the rules; no AWX code is imported.
"""
from __future__ import annotations

import re

import dateutil.rrule
import dateutil.tz

# Question type -> the Python types AWX accepts for its default (and answers).
SURVEY_TYPES = {
    "text": (str,), "textarea": (str,), "password": (str,), "multiplechoice": (str,),
    "multiselect": (str,), "integer": (int,), "float": (float, int),
}


def _choices(item):
    choices = item.get("choices", [])
    if isinstance(choices, str):
        choices = [c for c in choices.split("\n") if c.strip()]
    return list(choices)


def spec_errors(survey):
    """Errors AWX returns when this survey_spec is saved (plus what the UI would not let one enter)."""
    errors = []
    for field, kind in (("name", str), ("description", str), ("spec", list)):
        if not isinstance(survey.get(field), kind):
            errors.append("field %r missing or not %s" % (field, kind.__name__))
    if errors:
        return errors
    if not survey["spec"]:
        errors.append("'spec' doesn't contain any items")
    seen = set()
    for idx, item in enumerate(survey["spec"]):
        where = "question %d (%s)" % (idx, item.get("variable"))
        for field in ("type", "question_name", "variable", "required"):
            if field not in item:
                errors.append("%s: %r missing" % (where, field))
        if errors:
            continue
        if not isinstance(item["required"], bool):
            errors.append("%s: 'required' must be a boolean" % where)
        if item["variable"] in seen:
            errors.append("%s: variable duplicated" % where)
        seen.add(item["variable"])
        qtype = item["type"]
        if qtype not in SURVEY_TYPES:
            errors.append("%s: unknown type %r" % (where, qtype))
            continue
        if "default" in item and (isinstance(item["default"], bool)
                                  or not isinstance(item["default"], SURVEY_TYPES[qtype])):
            errors.append("%s: default %r is not a %s" % (where, item["default"], qtype))
        for key in ("min", "max"):
            if item.get(key) is not None and (isinstance(item[key], bool) or not isinstance(item[key], int)):
                errors.append("%s: %s must be an integer (AWX rejects others, also for float questions)" % (where, key))
        if qtype in ("multiplechoice", "multiselect"):
            if not _choices(item):
                errors.append("%s: must specify choices" % where)
            elif "default" in item and qtype == "multiplechoice" and item["default"] not in _choices(item):
                errors.append("%s: default %r is not one of the choices" % (where, item["default"]))
        if "default" in item and item["default"] is not None:
            errors.extend("%s: default: %s" % (where, e) for e in element_errors(item, {item["variable"]: item["default"]}))
        if item.get("min") is not None and item.get("max") is not None and item["min"] > item["max"]:
            errors.append("%s: min > max" % where)
    return errors


def element_errors(item, data, validate_required=True):
    """AWX's validation of one survey answer (data maps variable -> answer; absent = not answered)."""
    var, qtype = item["variable"], item["type"]
    errors = []
    if var not in data:
        if item["required"] and validate_required:
            errors.append("'%s' value missing" % var)
        return errors
    value = data[var]
    low = item.get("min") if item.get("min") not in ("", None) else None
    high = item.get("max") if item.get("max") not in ("", None) else None
    if qtype in ("text", "textarea", "password"):
        if not isinstance(value, str):
            return ["Value %r for '%s' expected to be a string." % (value, var)]
        if low is not None and len(value) < int(low):
            errors.append("'%s' value %r is too small (length must be at least %s)." % (var, value, low))
        if high is not None and len(value) > int(high):
            errors.append("'%s' value %r is too large (must be no more than %s)." % (var, value, high))
    elif qtype == "integer":
        if isinstance(value, bool) or not isinstance(value, int):  # AWX: type(value) != int
            return ["Value %r for '%s' expected to be an integer." % (value, var)]
        if low is not None and value < int(low):
            errors.append("'%s' value %s is too small (must be at least %s)." % (var, value, low))
        if high is not None and value > int(high):
            errors.append("'%s' value %s is too large (must be no more than %s)." % (var, value, high))
    elif qtype == "float":
        if isinstance(value, bool) or not isinstance(value, (float, int)):
            return ["Value %r for '%s' expected to be a numeric type." % (value, var)]
        if low is not None and value < float(low):
            errors.append("'%s' value %s is too small (must be at least %s)." % (var, value, low))
        if high is not None and value > float(high):
            errors.append("'%s' value %s is too large (must be no more than %s)." % (var, value, high))
    elif qtype == "multiselect":
        if not isinstance(value, list):
            return ["'%s' value is expected to be a list." % var]
        errors.extend("Value %r for '%s' expected to be one of %s." % (v, var, _choices(item))
                      for v in value if v not in _choices(item))
    elif qtype == "multiplechoice":
        if value not in _choices(item):
            errors.append("Value %r for '%s' expected to be one of %s." % (value, var, _choices(item)))
    return errors


class LaunchRejected(ValueError):
    """AWX would refuse to start the job (HTTP 400 on launch)."""


def launch_extra_vars(template, answers=None, launch_vars=None, from_ui=True):
    """The extra vars a job of ``template`` (a controller_templates item) starts with.

    ``answers``: what the operator changes in the survey form. The UI form starts filled with each
    question's default and sends every filled question (``from_ui``); a workflow node or a schedule
    sends only ``launch_vars`` (its extra_data), and AWX then does not insist on required answers.
    Precedence as in AWX: template extra_vars < valid survey defaults < launch values.
    """
    survey = template.get("survey_spec") or {}
    questions = survey.get("spec", []) if template.get("survey_enabled") else []
    runtime = dict(launch_vars or {})
    if from_ui:
        runtime.update({q["variable"]: q["default"] for q in questions if q.get("default") is not None})
    runtime.update(answers or {})
    errors, rejected = [], []
    for item in questions:
        errors.extend(element_errors(item, runtime, validate_required=from_ui))
    survey_vars = {q["variable"] for q in questions}
    for key in runtime:
        if key not in survey_vars and not template.get("ask_variables_on_launch"):
            rejected.append(key)
    if rejected:
        errors.append("variables %s are not allowed on launch (enable prompt on launch)" % ", ".join(sorted(rejected)))
    if errors:
        raise LaunchRejected("; ".join(errors))
    extra = dict(template.get("extra_vars") or {})
    for item in questions:
        if item.get("default") is not None and not element_errors(item, {item["variable"]: item["default"]}):
            extra[item["variable"]] = item["default"]
    extra.update(runtime)
    return extra


# --- schedules -------------------------------------------------------------------------------------

_BYDAY_NUMERIC = re.compile(r".*?BYDAY[\:\=][-+]?\d")


def rrule_errors(rrule):
    """Errors AWX's schedule serializer reports for this rrule string (empty when it accepts it)."""
    errors = []
    text = rrule.strip()
    lower = text.lower()
    dtstarts = re.findall(r"DTSTART[:;]", text)
    if not dtstarts:
        return ["Valid DTSTART required in rrule. Value should start with: DTSTART:YYYYMMDDTHHMMSSZ"]
    if len(dtstarts) > 1:
        errors.append("Multiple DTSTART is not supported.")
    start = re.search(r"DTSTART(;TZID=([^:]+))?:(\d{8}T\d{6})(Z?)", text)
    if not start:
        errors.append("Valid DTSTART required in rrule.")
    elif not start.group(2) and not start.group(4):
        errors.append("DTSTART cannot be a naive datetime. Specify ;TZINFO= or YYYYMMDDTHHMMSSZZ.")
    elif start.group(2) and start.group(4):
        errors.append("rrule parsing failed validation: TZID with a UTC 'Z' time")
    elif start.group(2) and dateutil.tz.gettz(start.group(2)) is None:
        errors.append("rrule parsing failed validation: A valid TZID must be provided (e.g., America/New_York)")
    rules = re.findall(r"RRULE:[^\s]+", text)
    if not rules:
        errors.append("RRULE required in rrule.")
    if "exdate:" in lower or "rdate:" in lower:
        errors.append("EXDATE/RDATE not allowed in rrule.")
    for rule in rules:
        if "interval" not in rule.lower():
            errors.append("INTERVAL required in rrule: %s" % rule)
        elif "secondly" in rule.lower():
            errors.append("SECONDLY is not supported: %s" % rule)
        if _BYDAY_NUMERIC.match(rule):
            errors.append("BYDAY with numeric prefix not supported: %s" % rule)
        if "COUNT" in rule and "UNTIL" in rule:
            errors.append("RRULE may not contain both COUNT and UNTIL: %s" % rule)
        count = re.search(r"COUNT=(\d+)", rule)
        if count and int(count.group(1)) > 999:
            errors.append("COUNT > 999 is unsupported: %s" % rule)
        if re.search(r"BYMONTHDAY=\d+,", rule):
            errors.append("Multiple BYMONTHDAYs not supported: %s" % rule)
        if re.search(r"BYMONTH=\d+,", rule):
            errors.append("Multiple BYMONTHs not supported: %s" % rule)
        if "byyearday" in rule.lower() or "byweekno" in rule.lower():
            errors.append("BYYEARDAY/BYWEEKNO not supported: %s" % rule)
    if not errors:
        try:
            parse_rrule(text)
        except (ValueError, TypeError) as exc:
            errors.append("rrule parsing failed validation: %s" % exc)
    return errors


def parse_rrule(rrule):
    """The rruleset AWX schedules from: its space-separated parts as lines, with the TZID resolved."""
    lines = rrule.strip().split(" ")
    tzinfos = {}
    match = re.search(r"TZID=([^:]+)", rrule)
    if match:
        tzinfos[match.group(1)] = dateutil.tz.gettz(match.group(1))
    return dateutil.rrule.rrulestr("\n".join(lines), forceset=True, tzinfos=tzinfos)
