# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sphinx configuration of the collection's docsite (scripts/antsibull copies it into .build/docsite-src).

Made by ``antsibull-docs sphinx-init --use-current llmops.specdec`` (antsibull-docs 2.28.0); changed: the
titles, and intersphinx only for the Ansible docsite, with a local inventory as its fallback (CI has no
network; tests/antsibull/docsite/ansible_devel.txt).
"""
from __future__ import annotations

import os

project = 'llmops.specdec'
copyright = 'llmops.specdec developers'

title = 'llmops.specdec documentation'
html_short_title = 'llmops.specdec'

extensions = ['sphinx.ext.autodoc', 'sphinx.ext.intersphinx', 'sphinx_antsibull_ext']

pygments_style = 'ansible'

highlight_language = 'YAML+Jinja'

html_theme = 'sphinx_ansible_theme'
html_show_sphinx = False

display_version = False

html_use_smartypants = True
html_use_modindex = False
html_use_index = False
html_copy_source = False

intersphinx_mapping = {
    'ansible_devel': (
        'https://docs.ansible.com/projects/ansible/devel/',
        (None, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'ansible_devel.inv')),
    ),
}

default_role = 'any'

nitpicky = True
