"""Which installable package an error says the runtime lacks, read from the error's own words.

A source whose processor (or model) imports a package the target runtime has not installed fails there for a reason
the user fixes with one install, not with another policy: transformers names the backend it requires ("X requires the
Torchvision library but it was not found in your environment"), Python names the module ("No module named 'x'").
"""

from __future__ import annotations

import re

# transformers' requires_backends / import-structure message, and Python's own ModuleNotFoundError text
_REQUIRES = re.compile(r"requires the (?P<name>[A-Za-z][\w.-]*) library but it was not found in your environment")
# a dotted name ("transformers.models.x") is a module a package lacks, not a package to install
_NO_MODULE = re.compile(r"No module named '(?P<name>[A-Za-z_]\w*)'")
# import names whose distribution on PyPI is spelled differently
_DISTRIBUTION = {"pil": "pillow", "cv2": "opencv-python", "sklearn": "scikit-learn", "yaml": "pyyaml"}


def missing_package(text: str | None) -> str | None:
    """The package to install, lower-case as pip takes it, or None when the text names none."""
    if not text:
        return None
    found = _REQUIRES.search(text) or _NO_MODULE.search(text)
    if not found:
        return None
    name = found.group("name").lower()
    return _DISTRIBUTION.get(name, name)


def install_advice(text: str | None, runtime: str = "the target runtime") -> str | None:
    """``install <pkg> in <runtime> …`` for an error that names a missing package, else None."""
    name = missing_package(text)
    if name is None:
        return None
    return (f"install {name} in {runtime} (pip install {name}, a build matching its torch) and run again; the source "
            f"needs it and the policy cannot work around a missing package")
