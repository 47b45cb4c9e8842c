"""Slot formatters used by templates: strings with {{content}} and special-token sets such as {"eos_token"}."""
from dataclasses import dataclass, field
from typing import List, Union

SLOTS = List[Union[str, set]]


@dataclass
class EmptyFormatter:
    slots: SLOTS = field(default_factory=list)

    def apply(self, **kwargs) -> SLOTS:
        return list(self.slots)


@dataclass
class StringFormatter:
    slots: SLOTS = field(default_factory=list)

    def apply(self, **kwargs) -> SLOTS:
        out = []
        for slot in self.slots:
            if isinstance(slot, str):
                for name, value in kwargs.items():
                    slot = slot.replace("{{" + name + "}}", value)
            out.append(slot)
        return out
