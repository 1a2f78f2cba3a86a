# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which slurmd have not yet come back from an `scontrol reconfigure`, read on slurmctld alone.

From 24.11 on, `scontrol reconfigure` re-executes slurmctld and every slurmd it can reach; a slurmd
re-executed with the new configuration registers again and slurmctld records a new SlurmdStartTime
for its node (`scontrol show node --oneliner`). Comparing that field before and after the reconfigure
tells, from slurmctld, which nodes run the new configuration, with no exec into each slurmd pod.

SlurmdStartTime has a resolution of one second: the config role lets a second pass between the read
before and the reconfigure, so a slurmd re-executed by it always reports a later time.

Only nodes whose slurmd was registered and answering before are waited for: a node not responding,
powered down, powering up or down, FUTURE or not yet registered gets no reconfigure RPC (it reads the
configuration when its slurmd next starts). A node that leaves that set during the wait (powered down
by power saving, scaled away, or its slurmd not answering: slurmctld marks it NOT_RESPONDING after its
next ping, 15 s for a frozen slurmd on 24.11) is not waited for either.

slurmctld re-executes too: until a dynamic node's slurmd has registered with the new slurmctld, the node
shows no SlurmdStartTime (None). That is "not yet", not "done".
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_nodes import parse_oneliner, parse_state

# state words (base state or flag, lower case) of a node whose slurmd the reconfigure does not reach
_UNREACHED = frozenset((
    "not_responding", "powered_down", "powering_up", "powering_down", "power_down", "future", "unknown",
    "reboot_issued",
))
_SUFFIXES = {"*": "not_responding", "~": "powered_down", "#": "powering_up", "%": "powering_down", "!": "power_down"}


def _nodes(output, what):
    """`scontrol show node --oneliner` -> {node: (reached by a reconfigure, SlurmdStartTime or None)}."""
    if not isinstance(output, str):
        raise AnsibleFilterError("slurm_nodes_not_reconfigured: %s must be the text of 'scontrol show node "
                                 "--oneliner', got %s" % (what, type(output).__name__))
    nodes = {}
    for line in output.splitlines():
        if not line.startswith("NodeName="):
            continue
        fields = parse_oneliner(line, ("NodeName", "State", "SlurmdStartTime"))
        base, flags = parse_state(fields.get("State", ""))
        # sinfo's suffixes, which older scontrol also printed: IDLE* is not responding, IDLE~ powered down
        words = {base, *flags} | {_SUFFIXES[char] for char in fields.get("State", "") if char in _SUFFIXES}
        start = fields.get("SlurmdStartTime")
        start = None if start in (None, "", "None", "Unknown") else start
        nodes[fields["NodeName"]] = (not words & _UNREACHED, start)
    return nodes


def slurm_nodes_not_reconfigured(after, before):
    """The names (sorted) of the nodes reached by the reconfigure whose slurmd has not registered again since,
    from two outputs of `scontrol show node --oneliner`: a node that was reached (registered, answering)
    before and still is, with the same SlurmdStartTime as before or none yet (slurmctld, itself just
    re-executed, shows none for a dynamic node until its slurmd registers again)."""
    nodes_before = _nodes(before, "the output before the reconfigure")
    nodes_after = _nodes(after, "the output after the reconfigure")
    pending = []
    for name, (reached, start) in nodes_before.items():
        if not reached or start is None or name not in nodes_after:
            continue
        still_reached, start_after = nodes_after[name]
        if still_reached and start_after in (None, start):
            pending.append(name)
    return sorted(pending)


class FilterModule(object):
    def filters(self):
        return {"slurm_nodes_not_reconfigured": slurm_nodes_not_reconfigured}
