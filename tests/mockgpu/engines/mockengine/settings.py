# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the mock engines find their data: GPU config, timing profile, faults."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ENGINES_DIR = os.path.dirname(HERE)

# The full profile: the one shipped beside the package in the checkout, or the one the mock host
# installs in /etc; $MOCK_ENGINE_PROFILE (possibly partial) is merged over it.
_BASE_PROFILES = (os.path.join(ENGINES_DIR, "profile.json"), "/etc/mockgpu/engine-profile.json")


def _read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def deep_merge(base, over):
    out = dict(base)
    for key, val in (over or {}).items():
        if isinstance(val, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], val)
        else:
            out[key] = val
    return out


def gpu_config_path():
    return os.environ.get("MOCKGPU_CONFIG") or "/etc/mockgpu/gpus.json"


def load_gpus():
    """Return {index: gpu dict} from the mock GPU config; {} when there is none."""
    try:
        data = _read_json(gpu_config_path())
    except (OSError, ValueError):
        return {}
    return {int(g["index"]): g for g in data.get("gpus", [])}


def load_profile():
    prof, base = {}, None
    for path in _BASE_PROFILES:
        if os.path.exists(path):
            prof, base = _read_json(path), path
            break
    over = os.environ.get("MOCK_ENGINE_PROFILE")
    if over and os.path.exists(over) and over != base:
        prof = deep_merge(prof, _read_json(over))
    return prof


def load_faults(method_key):
    """Faults for this start: `*` merged under the entry of the normalised method.

    Keys match case-insensitively so `eagle3` serves both vLLM and SGLang (EAGLE3).
    """
    path = os.environ.get("MOCK_ENGINE_FAULTS") or "/etc/mockgpu/faults.json"
    try:
        data = _read_json(path)
    except (OSError, ValueError):
        return {}
    lowered = {str(k).lower(): v for k, v in data.items() if isinstance(v, dict)}
    out = dict(lowered.get("*", {}))
    return deep_merge(out, lowered.get(method_key.lower(), {}))


def max_lifetime():
    """Optional hard cap (seconds) on every mock process; tests set it so nothing leaks."""
    try:
        return float(os.environ.get("MOCK_ENGINE_MAX_LIFETIME", "0")) or None
    except ValueError:
        return None
