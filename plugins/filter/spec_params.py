# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The canonical speculative-decoding parameter names, so playbooks can read them from flat vars."""
from __future__ import annotations

from ansible_collections.llmops.specdec.plugins.module_utils import _spec


def spec_param_names(_ignored=None):
    # Every name, whatever the method: a parameter that does not fit is then refused by
    # spec_normalize with the allowed list, instead of being silently dropped here.
    return sorted(_spec.PARAMS)


class FilterModule:
    def filters(self):
        return {"spec_param_names": spec_param_names}
