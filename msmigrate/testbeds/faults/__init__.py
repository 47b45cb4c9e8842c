"""Single faults injected into a green migration, each with its true owner and what its fix changes.

The fault-routing benchmark (``benchmarks/bench_fault_routing.py``) builds one green migration, copies it per
fault, applies the fault and runs the gates on the copy: what the classifier and the report then say is scored
against the fault's ``owner`` and ``fix``. The faults are written from how users break a migration (a typo in a
registration, a YAML value out of range, a template edited by hand, a runtime with an older library, a host whose
disk is full), not from what the failure catalog already matches.

A fault is text edits on the migration's files, addressed through placeholders that :class:`Layout` resolves for
the copy (``{plugin}`` the plugin package, ``{modeling}`` its model module, ``{config}`` the YAML, ``{launch}`` the
launch script, ``{data}`` the source's training records, ``{mm_plugin}`` / ``{template}`` / ``{collator}`` /
``{registry}`` the target's data path), and for environment faults a wrapped target runtime (:class:`Runtime`: an
interpreter script that sets variables and preloads a ``sitecustomize`` simulating the host or library state,
with the message the real condition prints).
"""

from __future__ import annotations

from msmigrate.testbeds.faults.injection import (OWNERS, Fault, FaultError, Layout, Replace, Runtime, SetLine, apply,
                                                 wrap_runtime)


def all_faults() -> list[Fault]:
    from msmigrate.testbeds.faults import (config, data, environment, heldout, heldout2, heldout3, heldout4,
                                           heldout5, heldout6, heldout7, heldout8, heldout9, heldout10, heldout11,
                                           heldout12, model)

    faults = [*model.FAULTS, *data.FAULTS, *config.FAULTS, *environment.FAULTS, *heldout.FAULTS,
              *heldout2.FAULTS, *heldout3.FAULTS, *heldout4.FAULTS, *heldout5.FAULTS, *heldout6.FAULTS,
              *heldout7.FAULTS, *heldout8.FAULTS, *heldout9.FAULTS, *heldout10.FAULTS, *heldout11.FAULTS,
              *heldout12.FAULTS]
    ids = [f.id for f in faults]
    if len(ids) != len(set(ids)):
        raise ValueError("fault ids must be unique")
    return faults


# The groups a benchmark selects and reports apart: ``main`` (written with the changes), ``heldout`` (faults/heldout.py
# and heldout2.py, written blind), ``heldout3`` (faults/heldout3.py, a later blind set measured on its own) and
# ``heldout4`` / ``heldout5`` / ``heldout6`` / ``heldout7`` / ``heldout8`` / ``heldout9`` / ``heldout10`` /
# ``heldout11`` / ``heldout12`` (faults/heldout4.py, heldout5.py, heldout6.py, heldout7.py, heldout8.py, heldout9.py,
# heldout10.py, heldout11.py, heldout12.py: the next blind sets, each measured on its own)
GROUPS = ("main", "heldout", "heldout3", "heldout4", "heldout5", "heldout6", "heldout7", "heldout8", "heldout9",
          "heldout10", "heldout11", "heldout12")


def fault_group(fault: Fault) -> str:
    """The group ``fault`` is reported in (one of GROUPS)."""
    from msmigrate.testbeds.faults import (heldout3, heldout4, heldout5, heldout6, heldout7, heldout8, heldout9,
                                           heldout10, heldout11, heldout12)

    for name, group in (("heldout3", heldout3), ("heldout4", heldout4), ("heldout5", heldout5),
                        ("heldout6", heldout6), ("heldout7", heldout7), ("heldout8", heldout8),
                        ("heldout9", heldout9), ("heldout10", heldout10), ("heldout11", heldout11),
                        ("heldout12", heldout12)):
        if fault.id in {f.id for f in group.FAULTS}:
            return name
    return "heldout" if fault.heldout else "main"


__all__ = ["GROUPS", "Fault", "FaultError", "Layout", "Replace", "Runtime", "SetLine", "all_faults", "apply",
           "fault_group", "wrap_runtime", "OWNERS"]
