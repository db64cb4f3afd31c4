# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""spec_report on the controller, in the task's worker: the report belongs to the controller, and a
module would cost a process, its AnsiballZ payload and ansible's module start-up for nothing
(bench/README.md, "Fewer tasks per switch"). The options and the writing are the module's
(plugins/module_utils/_report_files.py); the documentation is plugins/modules/spec_report.py.
"""

from __future__ import annotations

from ansible.module_utils.basic import missing_required_lib
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.llmops.specdec.plugins.module_utils import _report_files


display = Display()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=_report_files.ARGUMENT_SPEC)
        try:
            result.update(_report_files.write(
                args, self._task.check_mode, lambda lib: display.warning(missing_required_lib(lib) + " The chart was skipped.")))
        except _report_files.ReportError as exc:
            result.update(exc.result, failed=True, msg=exc.msg)
        return result
