# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Offline stand-in for ansible-test's get-pip.py download (installed as get_pip_24_2.py in its cache).

ansible-test bootstraps pip in its sanity venvs from https://ci-files.testing.ansible.com, which is
not reachable here; ensurepip gives the same pip, then the requested packages come from the
configured index. ensurepip sets PIP_CONFIG_FILE=/dev/null, so the environment is saved first.
"""
from __future__ import annotations

import ensurepip
import os
import subprocess
import sys


def main():
    env = dict(os.environ)
    ensurepip.bootstrap(upgrade=True)
    args = [a for a in sys.argv[1:] if a not in ('--no-setuptools', '--no-wheel')]
    env.setdefault('SSL_CERT_FILE', '/etc/ssl/certs/ca-certificates.crt')
    return subprocess.call([sys.executable, '-m', 'pip', 'install', '--upgrade'] + args, env=env)


if __name__ == '__main__':
    sys.exit(main())
